"""`gpubench recommend`: the fastest recipe for a model that fits a GPU and trains the same.

space.py   the candidates: combinations of the techniques the family takes (pure, torch-free)
race.py    the stopping rule: measure survivors round by round, drop one once its interval separates it
           from the best (pure; property-tested on synthetic measurements)
"""
