# -*- coding: utf-8 -*-
summe = 0.0
for x, y in loader:
    verlust = crit(model(x), y)
    verlust.backward()
    optimizer.step()
    optimizer.zero_grad()
    s = "🔥é"; summe += verlust
    größe = "日本"; über = verlust * 2
