from records import Learner


def run(net, opt, batches):
    learner = Learner(net, opt)
    wholes, heads, tails, marks = [], [], [], []
    for inp, tgt in batches:
        got = learner.update(inp, tgt)
        fit, extra, whole = got
        wholes.append(whole)
        head, tail = learner.update_split(inp, tgt)
        tails.append(tail)
        heads.append(head)
        first, last = learner.update_marks(inp, tgt)
        marks.append(last)
    print(wholes, heads, tails, marks)
