#!/usr/bin/env python3
# gzip_file.py IN OUT: gzip -9 with no file name or time in the header (the same bytes each run).
import gzip
import sys

with open(sys.argv[1], "rb") as source, open(sys.argv[2], "wb") as raw, \
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as out:
    out.write(source.read())
