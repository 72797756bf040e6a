"""Outliers among devices or hosts: the modified z-score the straggler checks share."""

from __future__ import annotations

import numpy as np

from tpuperf.columns import median

# The constant that makes the MAD of a normal sample estimate its standard deviation
# (Iglewicz and Hoaglin); with it |z| > 3.5 is the usual outlier rule, as in XProf.
_MAD_SCALE = 0.6745
# When more than half the devices share one value the MAD is 0; the mean absolute
# deviation, scaled to match (1.253314 = sqrt(pi/2)), takes over (IBM's convention).
_MEANAD_SCALE = 1.253314


def modified_z(values: np.ndarray) -> np.ndarray:
    """Modified z-scores (Iglewicz and Hoaglin); zeros when the values do not vary."""
    x = np.asarray(values, dtype="float64")
    if len(x) < 3:
        return np.zeros(len(x))
    med = median(x)
    mad = median(np.abs(x - med))
    if mad > 0:
        return _MAD_SCALE * (x - med) / mad
    meanad = np.mean(np.abs(x - med))
    if meanad > 0:
        return (x - med) / (_MEANAD_SCALE * meanad)
    return np.zeros(len(x))
