"""The report: terminal tables (``console``), and report.html / report.md / claims.json (``build``), assembled from the
claims (``claims``, one module per claim) and the verdicts ``pelab.rules`` draws from them."""
