/**
 * A kernel in a test: answers the requests a `FakeModel` sends, over the wire format,
 * with the results of a `MemoryDataSource`.
 */

import { ProtocolError } from "../src/data-source";
import type { MemoryDataSource } from "../src/memory-data-source";
import { parseCancel, parseRequest, type Request } from "../src/protocol";
import type { FakeModel } from "./fake-model";

function answer(memory: MemoryDataSource, req: Request): Promise<unknown> {
  switch (req.method) {
    case "children":
      return memory.children(req.params.path, req.params.offset, req.params.limit);
    case "node":
      return memory.node(req.params.path);
    case "search":
      return memory.search(req.params.pattern, req.params.limit);
    case "devices":
      return memory.devices();
    case "load":
      return memory.load(req.params);
    case "preview":
      return Promise.reject(new ProtocolError("NotImplementedError", "no preview in tests"));
  }
}

export interface FakeKernel {
  requests: Request[];
  cancels: number[];
  invalid: unknown[];
}

export function attachKernel(model: FakeModel, memory: MemoryDataSource): FakeKernel {
  const kernel: FakeKernel = { requests: [], cancels: [], invalid: [] };
  model.onSend = (msg) => {
    const cancel = parseCancel(msg);
    if (cancel) {
      kernel.cancels.push(cancel.id);
      return;
    }
    const req = parseRequest(msg);
    if (!req) {
      kernel.invalid.push(msg);
      return;
    }
    kernel.requests.push(req);
    const base = { kind: "tdview:reply", v: 1, id: req.id };
    answer(memory, req).then(
      (result) => model.emit("msg:custom", { ...base, ok: true, result }, []),
      (e: unknown) => {
        const error =
          e instanceof ProtocolError
            ? { type: e.type, message: e.message, path: e.path }
            : { type: "Error", message: String(e), path: null };
        model.emit("msg:custom", { ...base, ok: false, error }, []);
      },
    );
  };
  return kernel;
}
