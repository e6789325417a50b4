// ptepack's public C++ API, one header: the commands (pack, dump, verify, diff,
// sign), opening any artifact, errors and exit codes, and the types they use.
// Everything else is internal to the library (lib/src/) and may change in any
// release; the -dev package installs only what this header reaches.
#pragma once

#include "ptepack/artifact/artifact.h"
#include "ptepack/base/error.h"
#include "ptepack/base/memory_return.h"
#include "ptepack/diff/diff.h"
#include "ptepack/dump/dump.h"
#include "ptepack/io/output_file.h"
#include "ptepack/pack/pack.h"
#include "ptepack/sign/sign.h"
#include "ptepack/verify/reader.h"
#include "ptepack/verify/verify.h"
