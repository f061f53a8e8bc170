#ifndef BB_CJPEG_H
#define BB_CJPEG_H

#include <stddef.h>

/// Decodes the JPEG `input` (`inputLength` bytes) at 1/`scaleDenominator` of its size (1, 2, 4
/// or 8: libjpeg scales while decoding) and encodes it again at `quality` (1-100), baseline,
/// 4:2:0. On success returns 0, and `*output` (free it with `bb_jpeg_free`) holds
/// `*outputLength` bytes and `*width`, `*height` the new size. On failure returns -1 and
/// writes libjpeg's message into `message` (`messageLength` bytes, NUL-terminated).
/// libjpeg's errors are caught here (setjmp), never by exit().
int bb_jpeg_recompress(const unsigned char *input, unsigned long inputLength, int quality, int scaleDenominator,
                       unsigned char **output, unsigned long *outputLength, unsigned int *width, unsigned int *height,
                       char *message, size_t messageLength);

void bb_jpeg_free(unsigned char *output);

#endif
