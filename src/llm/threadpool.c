#include "threadpool.h"
