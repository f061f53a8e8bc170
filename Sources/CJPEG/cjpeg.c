#include "cjpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

struct bb_error {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char *message;
    size_t messageLength;
};

static void bb_error_exit(j_common_ptr info) {
    struct bb_error *error = (struct bb_error *)info->err;
    char text[JMSG_LENGTH_MAX];
    (*info->err->format_message)(info, text);
    if (error->message && error->messageLength > 0) snprintf(error->message, error->messageLength, "%s", text);
    longjmp(error->jump, 1);
}

/// Warnings (a corrupt but decodable stream) are not fatal and not printed.
static void bb_output_message(j_common_ptr info) { (void)info; }

int bb_jpeg_recompress(const unsigned char *input, unsigned long inputLength, int quality, int scaleDenominator,
                       unsigned char **output, unsigned long *outputLength, unsigned int *width, unsigned int *height,
                       char *message, size_t messageLength) {
    struct jpeg_decompress_struct in;
    struct jpeg_compress_struct out;
    struct bb_error inError, outError;
    /// What the error path frees: in memory (its address is taken), so a longjmp sees it as set.
    struct { unsigned char *pixels; unsigned char *encoded; unsigned long encodedLength; int haveIn, haveOut; } state;
    memset(&state, 0, sizeof state);

    *output = NULL;
    *outputLength = 0;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.err = jpeg_std_error(&inError.manager);
    inError.manager.error_exit = bb_error_exit;
    inError.manager.output_message = bb_output_message;
    inError.message = message;
    inError.messageLength = messageLength;
    out.err = jpeg_std_error(&outError.manager);
    outError.manager.error_exit = bb_error_exit;
    outError.manager.output_message = bb_output_message;
    outError.message = message;
    outError.messageLength = messageLength;

    if (setjmp(inError.jump) || setjmp(outError.jump)) {
        if (state.haveOut) jpeg_destroy_compress(&out);
        if (state.haveIn) jpeg_destroy_decompress(&in);
        free(state.pixels);
        free(state.encoded);
        return -1;
    }
    jpeg_create_decompress(&in);
    state.haveIn = 1;
    jpeg_mem_src(&in, input, inputLength);
    jpeg_read_header(&in, TRUE);
    in.scale_num = 1;
    in.scale_denom = (unsigned int)scaleDenominator;
    in.out_color_space = JCS_RGB;
    jpeg_start_decompress(&in);
    size_t stride = (size_t)in.output_width * (size_t)in.output_components;
    unsigned char *pixels = malloc(stride * in.output_height);
    state.pixels = pixels;
    if (!pixels) {
        if (message && messageLength > 0) snprintf(message, messageLength, "out of memory");
        jpeg_destroy_decompress(&in);
        return -1;
    }
    while (in.output_scanline < in.output_height) {
        JSAMPROW row = pixels + stride * in.output_scanline;
        jpeg_read_scanlines(&in, &row, 1);
    }
    jpeg_finish_decompress(&in);

    jpeg_create_compress(&out);
    state.haveOut = 1;
    jpeg_mem_dest(&out, &state.encoded, &state.encodedLength);
    out.image_width = in.output_width;
    out.image_height = in.output_height;
    out.input_components = 3;
    out.in_color_space = JCS_RGB;
    jpeg_set_defaults(&out);
    jpeg_set_quality(&out, quality, TRUE);
    jpeg_start_compress(&out, TRUE);
    while (out.next_scanline < out.image_height) {
        JSAMPROW row = pixels + stride * out.next_scanline;
        jpeg_write_scanlines(&out, &row, 1);
    }
    jpeg_finish_compress(&out);
    *width = out.image_width;
    *height = out.image_height;
    jpeg_destroy_compress(&out);
    jpeg_destroy_decompress(&in);
    free(pixels);
    *output = state.encoded;
    *outputLength = state.encodedLength;
    return 0;
}

void bb_jpeg_free(unsigned char *output) { free(output); }
