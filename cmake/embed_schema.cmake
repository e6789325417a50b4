# Writes the program schema text into a C++ source so the JSON reader can parse with it.
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from schema/program.fbs; do not edit.\n#include <string_view>\nnamespace ptepack::detail {\nextern const std::string_view kProgramSchemaText;\nconst std::string_view kProgramSchemaText = R\"ptepack_schema(${text})ptepack_schema\";\n}\n")
