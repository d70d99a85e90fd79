# Generates C++ message structs from proto/*.msg with tools/protogen/protogen.py. One header and one source per
# definition, named in snake_case, under ${MALA_GENERATED_DIR}/mala/protocol/messages/.
set(MALA_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
file(GLOB MALA_PROTO_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/proto/*.msg)
set(MALA_GENERATED_SOURCES "")
set(MALA_GENERATED_HEADERS "")
foreach(proto ${MALA_PROTO_FILES})
  get_filename_component(base ${proto} NAME_WE)
  string(REGEX REPLACE "([a-z0-9])([A-Z])" "\\1_\\2" snake ${base})
  string(TOLOWER ${snake} snake)
  list(APPEND MALA_GENERATED_SOURCES ${MALA_GENERATED_DIR}/mala/protocol/messages/${snake}.cc)
  list(APPEND MALA_GENERATED_HEADERS ${MALA_GENERATED_DIR}/mala/protocol/messages/${snake}.h)
endforeach()
set(MALA_GENERATED_EXTRA
  ${MALA_GENERATED_DIR}/mala/protocol/messages/message_samples.cc
  ${MALA_GENERATED_DIR}/mala/protocol/messages/all_messages.h
  ${MALA_GENERATED_DIR}/mala/protocol/messages/message_catalog.cc)
# Custom-command outputs are only visible to targets of the directory that declares them, so src/protocol calls this.
macro(mala_generate_protocol_sources)
file(GLOB MALA_PROTOGEN_SCRIPTS ${PROJECT_SOURCE_DIR}/tools/protogen/*.py)
add_custom_command(
  OUTPUT ${MALA_GENERATED_SOURCES} ${MALA_GENERATED_HEADERS} ${MALA_GENERATED_EXTRA}
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/protogen/protogen.py
          --proto-dir ${PROJECT_SOURCE_DIR}/proto --out-dir ${MALA_GENERATED_DIR}/mala/protocol/messages
  DEPENDS ${MALA_PROTO_FILES} ${MALA_PROTOGEN_SCRIPTS}
  COMMENT "Generating Kafka protocol messages from proto/"
  VERBATIM)
endmacro()
