"""The parts of benchmarks/composition.py, one module each; that script is the entry point (its
flags, the order the parts run in) and its docstring says what each part measures.

Where things are:
    shared.py    the results file (composition.json), episode folder, seed ranges, a task's
                 parents, the stored form of a paired comparison, a task's row and its headline
    quality.py   P1 quality (`--parts quality`) and its headlines
    vertex.py    the vertex gap (`--parts vertex`; external.py and external_pusht.py use it too)
    selector.py  the selector's scores and run (`--parts selector`)
    latency.py   P2 latency against the parents and the floor (`--parts latency`)
    search.py    P3 search cost (`--parts search`) and P4 search on the 2-simplex (`--parts k3`)
"""
