import { describe, expect, it } from "vitest";
import { BUFFER_DTYPES, decodeBuffer } from "../src/buffers";

const EXPECTED = {
  bool: Uint8Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  float32: Float32Array,
  float64: Float64Array,
} as const;

describe("decodeBuffer", () => {
  it.each(BUFFER_DTYPES)("reads %s into its typed array", (dtype) => {
    const Type = EXPECTED[dtype];
    const source = new Type(6);
    const data = decodeBuffer({ dtype, shape: [2, 3], buffer: 1 }, [
      new ArrayBuffer(0),
      new DataView(source.buffer),
    ]);
    expect(data).toBeInstanceOf(Type);
    expect(data.length).toBe(6);
  });

  it("views an aligned buffer without copying", () => {
    const bytes = new ArrayBuffer(16);
    const data = decodeBuffer({ dtype: "float32", shape: [2], buffer: 0 }, [
      new DataView(bytes, 8, 8),
    ]);
    expect(data.buffer).toBe(bytes);
    expect(data.byteOffset).toBe(8);
  });

  it("copies a misaligned buffer", () => {
    const bytes = new Uint8Array(9);
    new DataView(bytes.buffer).setFloat64(1, 2.5, true);
    const data = decodeBuffer({ dtype: "float64", shape: [1], buffer: 0 }, [
      new DataView(bytes.buffer, 1, 8),
    ]);
    expect(data.buffer).not.toBe(bytes.buffer);
    expect(data[0]).toBe(2.5);
  });

  it("accepts ArrayBuffers and other views", () => {
    const ints = Int32Array.of(7, -1);
    expect([...decodeBuffer({ dtype: "int32", shape: [2], buffer: 0 }, [ints.buffer])]).toEqual([
      7, -1,
    ]);
    expect([...decodeBuffer({ dtype: "int32", shape: [2], buffer: 0 }, [ints])]).toEqual([7, -1]);
  });

  it("reads a 0-d tensor as one element", () => {
    const data = decodeBuffer({ dtype: "uint8", shape: [], buffer: 0 }, [Uint8Array.of(9)]);
    expect([...data]).toEqual([9]);
  });

  it("refuses a byte length that does not match the shape", () => {
    expect(() =>
      decodeBuffer({ dtype: "float32", shape: [3], buffer: 0 }, [new ArrayBuffer(8)]),
    ).toThrow("buffer 0 holds 8 bytes; float32 of shape [3] needs 12");
  });

  it("refuses a missing buffer and an unknown dtype", () => {
    expect(() => decodeBuffer({ dtype: "float32", shape: [1], buffer: 2 }, [])).toThrow(
      "buffer 2 is missing",
    );
    expect(() =>
      decodeBuffer({ dtype: "bfloat16", shape: [1], buffer: 0 }, [new ArrayBuffer(2)]),
    ).toThrow("unsupported buffer dtype bfloat16");
    expect(() =>
      decodeBuffer({ dtype: "constructor", shape: [1], buffer: 0 }, [new ArrayBuffer(2)]),
    ).toThrow("unsupported");
  });
});
