// Timing and output shared by the probes in this folder: the median of six timed runs
// after two warm-up runs, with CUDA events around each launch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

// `launch(run)` queues one run (run numbers vary the probe's keys); `prepare()` runs
// before each, outside the timing.
template <typename Launch, typename Prepare>
float median_ms(Launch launch, Prepare prepare) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> times;
    for (int run = 0; run < 8; ++run) {
        prepare();
        cudaEventRecord(start);
        launch(run);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms;
        cudaEventElapsedTime(&ms, start, stop);
        if (run >= 2) times.push_back(ms);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// One line of a probe's output: what was measured and its median time.
struct ProbeRow {
    const char *name;
    float ms;
};

template <size_t N>
void print_rows(const ProbeRow (&rows)[N], int blocks_per_sm, uint64_t ops, const char *unit) {
    for (const ProbeRow &row : rows) {
        printf("%-42s %d blocks/SM: %6.0f M %s/s\n", row.name, blocks_per_sm, ops / (row.ms / 1e3) / 1e6, unit);
    }
}
