"""Experiments on real pretrained models (the loaders they read are in ``pelab.weights``).

``compare``    what each model's position table encodes, beside a closed-form table of its size
``compare_figures``, ``sidebyside``  `pelab pretrained --model ...`: figures, JSON and Markdown
``positions``  what its learned position table encodes, beside a sinusoidal table (C1, C11, C16)
``frozen``     frozen MiniLM word vectors + positions, added or concatenated (C9)
``figures``    the figures, beside a sinusoidal table of the same size
``report``     `pelab pretrained`: the JSON of numbers and the report's Markdown sections
"""
