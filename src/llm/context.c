#include "context.h"
