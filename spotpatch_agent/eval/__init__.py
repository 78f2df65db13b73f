"""``spotpatch-agent eval``: a model eval that ships with the product (issue 27 part 1; docs/eval.md).

A fixed suite of tasks (:mod:`.tasks`) on three small apps the package ships runs through the real engine
(:mod:`.runner`), each result judged by file predicates and the app's typecheck (:mod:`.judge`), never by
a model; :mod:`.report` prints the table and writes the JSON; :mod:`.cli` holds the flags.
"""
