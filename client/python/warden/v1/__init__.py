"""The gRPC stubs generated from proto/warden/v1 (package warden.v1), shipped
inside the package: executor_pb2, executor_pb2_grpc, agent_pb2, agent_pb2_grpc,
images_pb2, images_pb2_grpc (templates and volumes)."""
