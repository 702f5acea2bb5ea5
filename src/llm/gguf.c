#include "gguf.h"
