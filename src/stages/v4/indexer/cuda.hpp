// v4.indexer's CUDA entry point (cuda.cu), callable from C++20 code: std::runtime_error on a CUDA failure.
#pragma once
#include "stages/v4/indexer/core.hpp"

namespace dsa::v4::indexer {

// scores, bounds [T, C] (host memory): core::score_thread for every (t, j < C) on the GPU.
void scores_cuda(const core::ScoreJob& job, double* scores, double* bounds);

}  // namespace dsa::v4::indexer
