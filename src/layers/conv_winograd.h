/* Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (Lavin and Gray 2016): every 2x2 block of
 * outputs from a 4x4 block of inputs with 16 multiplications per (input, output) channel pair
 * instead of 36, as 16 GEMMs over (channel, tile). conv.c takes it for forward and for the input
 * gradient (a 3x3 convolution of dY with the flipped, transposed weights) where
 * dt_winograd_wanted says so; the weight gradient stays im2col's. */
#ifndef DT_CONV_WINOGRAD_H
#define DT_CONV_WINOGRAD_H

#include <stddef.h>

/* Whether a k x k, stride s, pad p convolution takes Winograd: k 3, stride 1,
 * pad <= 2, and DTRAIN_WINOGRAD=1. Off by default: on an AVX2 Zen 3 core it was slower than
 * im2col on every zoo shape (docs/results.md, issue 20: its GEMMs took 27% less time on
 * resnet18-cifar, but its transforms, 16 planes of tiles streamed through memory, cost more
 * than that); the tests run it forced. A rule of the shape, never a timing at start: every rank
 * and run of a model computes the same way, to the same rounding. */
int dt_winograd_wanted(int k, int stride, int pad);
/* Whether it can: k 3, stride 1, pad <= 2 (a plan's own-winograd) */
int dt_winograd_fits(int k, int stride, int pad);
/* Images per group for an output of oh x ow (the GEMMs' width: tiles of the group). */
int dt_winograd_group(int oh, int ow, int batch);
/* Floats of work for groups of g images of an oh x ow output, ic -> oc channels: the filter
 * transform, a padded channel, the inputs' transforms, the products. */
size_t dt_winograd_workspace(int ic, int oc, int oh, int ow, int g);
/* U[16][oc][ic] = G w G^T of w[oc][ic][3][3]; flip: the input gradient's filter, of
 * w'[ic][oc][a][b] = w[oc][ic][2-a][2-b], as U[16][ic][oc]. */
void dt_winograd_filter(const float *w, int oc, int ic, int flip, float *U);
/* y[i][o] (+)= bias[o] + (x[i] * w[o]), i < g images of ic x h x w, pad p, oh = h + 2p - 2 (and
 * ow), with U from dt_winograd_filter; relu: max(., 0) (forward's fused ReLU); acc: add into y
 * (no bias, no relu). work: dt_winograd_workspace's floats, U first. */
void dt_winograd_conv(const float *x, int g, int ic, int h, int w, int pad, int oc, const float *bias, int relu,
                      int acc, float *y, float *work);

#endif
