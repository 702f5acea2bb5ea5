#include "options.h"
#include "cli.h"
int main(void) { struct lc_options o = {0}; return lc_cli_run(&o); }
