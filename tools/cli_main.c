/* nntrainer's main(): the tool itself is nnt_cli_main (nntrainer_cli.c),
 * which tests run in-process. */
#include "tools/cli.h"

int main(int argc, char **argv) { return nnt_cli_main(argc, argv); }
