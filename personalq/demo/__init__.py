"""The demo repository: 60 personalized PQ-Nano checkpoints that ship in `assets/demo_repo`.

`personalq.demo.build` trains them; `personalq.demo.fidelity` measures whether their triggers work.
"""
