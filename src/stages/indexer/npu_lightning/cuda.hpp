// indexer.npu_lightning's CUDA entry point (cuda.cu), callable from C++20 code: std::runtime_error on a CUDA failure.
#pragma once
#include "stages/indexer/npu_lightning/core.hpp"

namespace dsa::indexer::npu_lightning {

// scores, bounds [T, C] (host memory): core::score_thread for every (t, j < C) on the GPU.
void scores_cuda(const core::ScoreJob& job, double* scores, double* bounds);

}  // namespace dsa::indexer::npu_lightning
