"""IPython's lines that are not Python (`!pip install ...`, `%matplotlib inline`, `cd data`): recognised at the start
of a statement, for notebook cells (torchlint.notebook) and for the `.py` exports of notebooks that keep them
(`mask_ipython_lines`)."""

from __future__ import annotations

import re

from torchlint.source import pyast
from torchlint.source.lines import split_lines

# IPython's escapes at the start of a statement (`%magic`, `!cmd`, `?obj`/`??obj` help, the autocall escapes
# `/f x`, `,f a b`, `;f a b`: no Python statement starts with one), an assignment from a magic or a shell command
# (`x = %time f()`, `files = !ls`), and the help suffix (`obj?`, `obj.attr??`, `np.*load*?`).
_MAGIC_LINE = re.compile(r"^\s*[%!?/,;]|^[^#'\"]*=\s*(%\w|!)|^\s*%{0,2}[\w.*]+\?\??\s*$")
# IPython's line magics and the shell aliases it defines as magics: with automagic (on by default) a line that
# starts with one of these names followed by a space or the line's end runs the magic (`cd data`, `pip install x`)
# unless what follows starts with `=` or `,` (IPython's assignment check: `cd = 3` is Python) or the name is a
# variable. Kept conservative: only a line that is not Python on its own and leaves no bracket, string or
# backslash continuation open is taken for one (`ls` alone, `ls(x)`, `pwd + "/x"`, `time (a +` stay Python).
_AUTOMAGICS = frozenset("""
    alias alias_magic autoawait autocall automagic autosave bookmark cat cd clear colors conda config connect_info cp
    debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir less lf lk ll load load_ext loadpy
    logoff logon logstart logstate logstop ls lsmagic lx macro magic man matplotlib mamba micromamba mkdir more mv
    notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision prun psearch psource pushd pwd
    pycat pylab qtconsole quickref recall rehashx reload_ext rep rerun reset reset_selective rm rmdir run save sc
    set_env store sx system tb time timeit unalias unload_ext uv who who_ls whos xdel xmode
""".split())
_AUTOMAGIC_LINE = re.compile(r"^\s*([A-Za-z_]\w*)(?:[ \t]+(.*))?$")


class LineState:
    """Where a line of Python leaves the logical line: inside brackets, a triple-quoted string or after a
    backslash, the next physical line continues it (`print("..."\n      % (a, b))` is not a line magic)."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # an open triple quote
        self.backslash = False

    def at_statement_start(self) -> bool:
        return self.depth == 0 and not self.quote and not self.backslash

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        while i < n:
            if self.quote:
                end = line.find(self.quote, i)
                if end < 0:
                    break
                i, self.quote = end + 3, ""
                continue
            c = line[i]
            if c == "#":
                break
            if c in "'\"":
                if line.startswith(c * 3, i):
                    self.quote = c * 3
                    i += 3
                    continue
                i += 1
                while i < n and line[i] != c:
                    i += 2 if line[i] == "\\" else 1
            elif c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1
        self.backslash = not self.quote and line.endswith("\\")


def is_magic(line: str) -> bool:
    """An IPython line (at the start of a statement) that is not Python: an escape, or an automagic."""
    if _MAGIC_LINE.match(line):
        return True
    m = _AUTOMAGIC_LINE.match(line.rstrip("\r\n"))
    if m is None or m.group(1) not in _AUTOMAGICS or (m.group(2) or "").startswith(("=", ",")):
        return False
    state = LineState()
    state.feed(line)
    if not state.at_statement_start():
        return False  # the next line continues it: Python split over lines
    try:
        pyast.parse(line.strip() + "\n", "<cell line>")
    except SyntaxError:
        return True  # `cd data/My\\ Drive`, `pip install x`: not Python, the magic IPython runs
    return False


def mask_ipython_lines(text: str) -> tuple[str, list[int]] | None:
    """`text` with each IPython line at the start of a statement (and the lines a trailing backslash continues it
    onto) replaced by `pass` at its indent, line for line, and the numbers of those lines; None when it has none."""
    out: list[str] = []
    masked: list[int] = []
    state = LineState()
    continued: str | None = None
    for number, raw in enumerate(split_lines(text), start=1):
        if continued is not None or (state.at_statement_start() and is_magic(raw)):
            indent = continued if continued is not None else raw[: len(raw) - len(raw.lstrip())]
            out.append(indent + "pass")
            masked.append(number)
            continued = indent if raw.endswith("\\") else None
        else:
            out.append(raw)
            state.feed(raw)
    return ("".join(line + "\n" for line in out), masked) if masked else None
