"""Source basics every layer may use: bytes to text (`decode`), the one line index (`lines`), a cheap `ast` parse
(`pyast`), read-only libcst walks (`walk`), and the line:col of libcst nodes (`positions`). Nothing here knows
about PyTorch."""
