"""The small world the system-model tests run in: two requests, block size 2,
W = 2, R = 4, and the v1/v2 callers in align mode."""

from replayssm.spec.geometry import Conventions, Geometry

GEO = Geometry(max_num_reqs=2, block_size=2, window=2, ring_len=4)
V1 = Conventions(cumulative=False, post_step=False, has_idx_mapping=False, materialize_prefixes=True, live_col_is_zero=False)
V2 = Conventions(cumulative=True, post_step=True, has_idx_mapping=True, materialize_prefixes=True, live_col_is_zero=False)
