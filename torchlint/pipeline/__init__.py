"""The engine's stages, one module each, in the order a file goes through them:

decode -> prefilter (rules whose necessary text the file holds) -> prune (blank functions that cannot matter)
-> analyze (parse once, build the model, run the rules) -> suppress (`# noqa`) -> positions -> apply (fixes).
`torchlint.engine` says the order; the front ends call the engine.
"""
