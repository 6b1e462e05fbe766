"""The core values and rules every layer uses: problems, configs, spaces, results,
verdicts, templates, the argument rules, the one output writer, the bounded JSON
reader, where the store lives, the ceilings file (roofline/), text tables."""
