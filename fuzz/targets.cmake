# The fuzz targets, one per reader: fuzz/fuzz_<name>.cpp, corpus/<name>/, crashes/<name>/.
set(PTEPACK_FUZZ_TARGETS
  program_binary
  program_json
  safetensors
  safetensors_index
  ptd
  pte
  zip
  manifest
  json_document
  signature)
