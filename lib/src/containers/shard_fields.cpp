// The shard options a manifest records (shard_fields.h): one row per option, read by the
// manifest reader and writer and by pack's option table.
#include "containers/shard_fields.h"

#include "containers/manifest_reader.h"

namespace ptepack {

namespace {

using R = ManifestReader;

constexpr std::array<ShardField, 8> kShardFields{{
    {"shard_format",
     "--shard-format",
     {"ptd", "safetensors"},
     [](R& r, const JsonValue& j, Manifest& m) {
       const auto format = r.string(j, "shard_format", "");
       if (format != "ptd" && format != "safetensors")
         r.bad("shard_format", "expected \"ptd\" or \"safetensors\"");
       m.shard_format = format == "ptd" ? ShardFormat::ptd : ShardFormat::safetensors;
     },
     [](JsonWriter& w, const Manifest& m) {
       w.field("shard_format", shard_format_name(m.shard_format));
     }},
    {"max_shard_bytes",
     "--max-shard-bytes",
     {},
     [](R& r, const JsonValue& j, Manifest& m) {
       const auto& cap = r.field(j, "max_shard_bytes", "");
       if (!cap.is_null()) m.max_shard_bytes = r.number(j, "max_shard_bytes", "");
     },
     [](JsonWriter& w, const Manifest& m) {
       w.key("max_shard_bytes");
       if (m.max_shard_bytes) {
         w.value(*m.max_shard_bytes);
       } else {
         w.null();
       }
     }},
    {"cap_mode",
     "--cap-mode",
     {"file", "payload"},
     [](R& r, const JsonValue& j, Manifest& m) {
       const auto cap_mode = r.string(j, "cap_mode", "");
       if (cap_mode != "file" && cap_mode != "payload")
         r.bad("cap_mode", "expected \"file\" or \"payload\"");
       m.cap_mode = cap_mode == "file" ? CapMode::file : CapMode::payload;
     },
     [](JsonWriter& w, const Manifest& m) { w.field("cap_mode", cap_mode_name(m.cap_mode)); }},
    {"oversize",
     "--oversize",
     {"error", "own-shard"},
     [](R& r, const JsonValue& j, Manifest& m) {
       if (j.find("oversize") == nullptr) return;
       if (r.string(j, "oversize", "") != "own-shard") r.bad("oversize", "expected \"own-shard\"");
       m.oversize_own_shard = true;
     },
     [](JsonWriter& w, const Manifest& m) {
       if (m.oversize_own_shard) w.field("oversize", "own-shard");
     }},
    {"alignment",
     "--alignment",
     {},
     [](R& r, const JsonValue& j, Manifest& m) {
       if (j.find("alignment") == nullptr) return;
       m.alignment = r.number(j, "alignment", "");
       if (m.shard_format != ShardFormat::ptd) r.bad("alignment", "only with .ptd shards");
       if (auto problem = alignment_problem(*m.alignment); !problem.empty())
         r.bad("alignment", problem);
     },
     [](JsonWriter& w, const Manifest& m) {
       if (m.alignment) w.field("alignment", *m.alignment);
     }},
    {"max_shard_tensors",
     "--max-shard-tensors",
     {},
     [](R& r, const JsonValue& j, Manifest& m) {
       if (j.find("max_shard_tensors") == nullptr) return;
       m.max_shard_tensors = r.number(j, "max_shard_tensors", "");
       if (*m.max_shard_tensors == 0) r.bad("max_shard_tensors", "expected at least 1");
     },
     [](JsonWriter& w, const Manifest& m) {
       if (m.max_shard_tensors) w.field("max_shard_tensors", *m.max_shard_tensors);
     }},
    {"placement",
     "--placement",
     {"sets", "single"},
     [](R& r, const JsonValue& j, Manifest& m) {
       if (j.find("placement") == nullptr) return;
       if (r.string(j, "placement", "") != "single" || m.version != kManifestProgramsVersion)
         r.bad("placement", "expected \"single\", in version 2");
       m.placement_single = true;
     },
     [](JsonWriter& w, const Manifest& m) {
       if (m.placement_single) w.field("placement", "single");
     }},
    {"shard_prefix",
     "--shard-prefix",
     {},
     [](R& r, const JsonValue& j, Manifest& m) {
       if (j.find("shard_prefix") == nullptr) return;
       m.shard_prefix = r.string(j, "shard_prefix", "");
       if (auto problem = shard_prefix_problem(*m.shard_prefix); !problem.empty())
         r.bad("shard_prefix", problem);
     },
     [](JsonWriter& w, const Manifest& m) {
       if (m.shard_prefix) w.field("shard_prefix", *m.shard_prefix);
     }},
}};

}  // namespace

std::span<const ShardField> shard_fields() { return kShardFields; }

}  // namespace ptepack
