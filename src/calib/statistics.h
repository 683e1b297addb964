// What calibration keeps of a tensor: running extrema, histograms (counts only, on bins that
// depend on neither the order nor the number of samples, so merging them is a sum), and squared
// errors per candidate power-of-two position. Each is mergeable, so samples can be split over
// workers and merged at the end. Each has a header of its own, as has what the methods read
// from a histogram; this one includes them all.
#pragma once

#include "calib/entropy_search.h"
#include "calib/exact_sum.h"
#include "calib/grid_histogram.h"
#include "calib/histogram.h"
#include "calib/histogram_ranges.h"
#include "calib/min_max_stats.h"
#include "calib/range.h"
#include "calib/reduce_blocks.h"
