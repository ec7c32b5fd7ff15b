import type * as Reflection from 'nice-grpc-server-reflection';
import { loadDescriptorSet } from './descriptor';

/*
 * gRPC server reflection (grpcurl, Postman), built on its first call. nice-grpc-server-reflection
 * decodes the whole FileDescriptorSet, comments included, into google-protobuf objects when its
 * service is made: with google-protobuf's runtime that is some 4 MiB of heap that every svc kept
 * for a call that most never receive (docs/performance.md, Memory). Here the service's definition
 * is the same method (path, bidirectional streaming) whose (de)serialisers and implementation
 * require the package and decode gen/svc.binpb (read at start: 112 KB) on first use; the answers
 * are the package's own.
 */

const PATH = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';

type Definition = (typeof Reflection.ServerReflectionService)['serverReflectionInfo'];
type Request = Parameters<Definition['requestSerialize']>[0];
type Response = Parameters<Definition['responseSerialize']>[0];
type Implementation = ReturnType<typeof Reflection.ServerReflection>;

let reflection: typeof Reflection | undefined;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const load = (): typeof Reflection => (reflection ??= require('nice-grpc-server-reflection') as typeof Reflection);
const method = (): Definition => load().ServerReflectionService.serverReflectionInfo;

/** The ServerReflection service's definition (grpc-js form, as the package's own). */
export const LazyServerReflectionService = {
  serverReflectionInfo: {
    path: PATH,
    requestStream: true,
    responseStream: true,
    requestSerialize: (value: Request): Buffer => method().requestSerialize(value),
    requestDeserialize: (bytes: Buffer): Request => method().requestDeserialize(bytes),
    responseSerialize: (value: Response): Buffer => method().responseSerialize(value),
    responseDeserialize: (bytes: Buffer): Response => method().responseDeserialize(bytes),
  },
} as const;

/**
 * The implementation: `ServerReflection(gen/svc.binpb, serviceNames)`, made on the first call. The
 * file is read now (a missing one still stops the start), only its decoding waits.
 */
export function lazyServerReflection(serviceNames: readonly string[]): Implementation {
  const protoset = loadDescriptorSet();
  let impl: Implementation | undefined;
  return {
    serverReflectionInfo(requests, context) {
      impl ??= load().ServerReflection(protoset, [...serviceNames]);
      return impl.serverReflectionInfo(requests, context);
    },
  };
}
