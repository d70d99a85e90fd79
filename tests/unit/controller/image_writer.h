// A metadata_writer over a plain image, for unit tests of the controller's managers without a metadata log:
// each write applies its records at the next offsets (epoch 1), keeps every batch for inspection, and can be
// made to fail like a lost leadership.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mala/controller/controller_records.h"
#include "mala/controller/feature_control.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

class image_writer final : public metadata_writer {
 public:
  // An image finalized at bootstrap_metadata_version, as a freshly formatted cluster's first write leaves it.
  image_writer() : _image(std::make_shared<metadata::metadata_image>()) {
    const status st = write(bootstrap_records(*_image));
    (void)st;
    batches.clear();
  }

  const metadata::metadata_image_ptr& image() const override { return _image; }
  int64_t next_offset() const override { return _next_offset; }
  status write(const record_list& records) override {
    if (fail_writes) return status::error(error_code::not_controller, "injected lost leadership");
    if (records.empty()) return status::success();
    metadata::metadata_delta delta(_image);
    for (const auto& r : records) {
      if (auto st = delta.apply(r.record, _next_offset++, 1); !st.ok()) return st;
    }
    _image = delta.build();
    batches.push_back(records);
    return status::success();
  }

  std::vector<record_list> batches;
  bool fail_writes = false;

 private:
  metadata::metadata_image_ptr _image;
  int64_t _next_offset = 0;
};

// A broker registration as a broker sends it (one log dir, a PLAINTEXT listener).
inline metadata::broker_registration test_registration(int32_t id) {
  metadata::broker_registration b;
  b.id = id;
  b.incarnation_id = uuid::random();
  b.log_dirs = {uuid::random()};
  b.endpoints.push_back({"PLAINTEXT", "localhost", static_cast<uint16_t>(9092 + id), "PLAINTEXT"});
  // The bootstrap finalizes transaction.version: a broker must support it to register.
  b.supported_features[std::string(transaction_version_feature)] = {0, 2};
  return b;
}

}  // namespace mala::controller
