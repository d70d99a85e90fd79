// The metadata image written out as the metadata records that rebuild it: Kafka's MetadataImage.write
// (ImageWriter), which the controller uses for its snapshots of __cluster_metadata (KIP-630). Applying the
// records in order with metadata_delta to an empty image (with the same cluster id) gives an image equal to
// the original in every field the records carry: everything but cluster_id, controller_id,
// metadata_offset/metadata_epoch (set by whoever loads the snapshot), and topic_metadata::internal, which
// metadata_delta derives from the topic name.
//
// The order is Kafka's: features (metadata.version first, as FeaturesImage.write does, so a loader knows the
// record versions before anything else), brokers (ClusterImage), topics each followed by its partitions
// (TopicsImage), configs (ConfigurationsImage), the producer id counter (ProducerIdsImage), ACLs (AclsImage).
// Records are at the versions the controller writes (quorum_controller.cc): RegisterBrokerRecord v3,
// PartitionRecord v2, v0 for the others.
//
// Pure function on an immutable image: callable from any thread.
#pragma once

#include <vector>

#include "mala/metadata/metadata_image.h"
#include "mala/metadata/metadata_records.h"

namespace mala::metadata {

std::vector<versioned_metadata_record> image_to_records(const metadata_image& image);

}  // namespace mala::metadata
