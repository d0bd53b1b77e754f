#include "cli.hpp"

int main(int argc, char** argv) { return awa::cli::run(argc, argv); }
