"""WebShop (Yao et al. 2022) in text mode: in-process engine, exact snapshot/restore."""
