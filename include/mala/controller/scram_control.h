// SCRAM credentials (Kafka's ScramControlManager, KIP-554): AlterUserScramCredentials validated against the
// image and turned into UserScramCredentialRecord / RemoveUserScramCredentialRecord, and
// DescribeUserScramCredentials answered from an image. The controller stores what the server needs to verify
// a password (StoredKey, ServerKey), computed here from the client's salted password, never the password.
//
// Pure functions on plain data: safe from any thread.
#pragma once

#include "mala/controller/controller_records.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_user_scram_credentials_request.h"
#include "mala/protocol/messages/alter_user_scram_credentials_response.h"
#include "mala/protocol/messages/describe_user_scram_credentials_request.h"
#include "mala/protocol/messages/describe_user_scram_credentials_response.h"

namespace mala::controller {

struct scram_alteration {
  record_list records;  // written all together or not at all
  protocol::alter_user_scram_credentials_response response;
};

// ScramControlManager.alterCredentials: per user, DUPLICATE_RESOURCE when a request alters a user twice,
// UNACCEPTABLE_CREDENTIAL for an empty user name or iterations outside 4096..16384,
// UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, RESOURCE_NOT_FOUND for a deletion of a credential that
// does not exist. A refused user writes nothing; the others do.
scram_alteration alter_user_scram_credentials(const metadata::metadata_image& image,
                                              const protocol::alter_user_scram_credentials_request& request);

// KafkaApis.handleDescribeUserScramCredentialsRequest over the image: every user with a credential (users
// null or empty), or the named ones: RESOURCE_NOT_FOUND "Attempt to describe a user credential that does not
// exist: <user>", DUPLICATE_RESOURCE "Cannot describe SCRAM credentials for the same user twice in a single
// request: <user>".
protocol::describe_user_scram_credentials_response describe_user_scram_credentials(
    const metadata::metadata_image& image, const protocol::describe_user_scram_credentials_request& request);

}  // namespace mala::controller
