/** zstd for tests, where Node has it (22.15 and later: the image's Node 26); Node 20, whose types these are, has none. */
import * as zlib from 'node:zlib';

export const zstdCompressSync = (zlib as unknown as { zstdCompressSync?: (b: Buffer, o?: { params: Record<number, number> }) => Buffer }).zstdCompressSync;

/** zstd's ZSTD_c_windowLog parameter (zstd.h), which Node 20's types do not name. */
export const ZSTD_C_WINDOW_LOG = 101;
