#!/bin/sh
# Expected failure (XFAIL_TESTS): stories260K-ff192-q4_0's greedy ids drift from llama.cpp's
# after 50-100 tokens in 4 of 5 prompts (logits at steps 0-2 agree to 5e-6).  llama.cpp repacks
# Q4_0 weights into its interleaved Q4_0x8 layout on AVX2 machines and its summation order there
# is not reproduced exactly yet.  When it is, this test passes and automake reports XPASS: move
# the files back into test-greedy's list.
B=${LC_BUILDDIR:-.}
S=${LC_SHARED:-../shared}
exec "$B/tests/test-greedy" "$S"/reference/greedy/stories260K-ff192-q4_0.p*.txt
