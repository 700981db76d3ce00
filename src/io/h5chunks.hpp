// Parallel reads of chunked, gzip(+shuffle) datasets: the chunks are fetched raw (H5Dread_chunk, sequential: HDF5 is
// not thread-safe) in batches, then inflated, unshuffled and scattered into the destination by all cores. HDF5's own
// H5Dread decompresses chunk after chunk on one core (~300 MB/s): the Python kit writes every dump this way.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsa::io {

enum class ChunkRead { done, unsupported, failed };

// Reads rows [row0, row1) of dim 0 of dataset `ds` (every other dim whole) into `dst` (row-major, raw element bits
// in little-endian order, elem_size bytes each). `unsupported`: not a chunked dataset whose filters are only
// shuffle and deflate with a little-endian element type: the caller reads it with H5Dread. `failed`: a chunk could
// not be read or inflated to its size; `err` says which. inflate = false: fetch every raw chunk through HDF5's chunk
// index and nothing else (the isolated walk of io::read_file: HDF5 code is what may crash; zlib refuses bad data).
// Chunks are fetched in batches of about batch_bytes (stored + inflated sizes); while the cores inflate one batch, a
// second thread fetches the next. Chunks of whole rows that need inflating only land in dst directly.
ChunkRead read_chunked_rows(hid_t ds, std::int64_t row0, std::int64_t row1, std::size_t elem_size, void* dst,
                            std::string& err, bool inflate = true, std::size_t batch_bytes = std::size_t{64} << 20);

}  // namespace dsa::io
