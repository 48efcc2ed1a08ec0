"""The engine's stages, one module each: `prefilter` (the rules whose necessary text the file holds),
`analyze` (which runs the prefilter, blanks the functions that cannot matter with `analysis.prune`, parses once,
builds the file model and runs the rules), `suppress` (`# noqa`) and `apply` (fixes as tree replacements, and the
text edits they make). `torchlint.engine` calls them in order; the front ends call the engine.
"""
