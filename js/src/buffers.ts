/**
 * Binary buffers of a reply, turned into typed arrays.
 *
 * Only dtypes with a typed-array equivalent travel; Python converts the others before
 * sending (bfloat16 and float16 → float32, float8 → float32, complex → not previewed).
 * bool arrives as one byte per element and is read as a Uint8Array of 0/1.
 */

export const BUFFER_DTYPES = [
  "bool",
  "int8",
  "uint8",
  "int16",
  "uint16",
  "int32",
  "uint32",
  "int64",
  "uint64",
  "float32",
  "float64",
] as const;
export type BufferDtype = (typeof BUFFER_DTYPES)[number];

export type TypedArray =
  | Uint8Array
  | Int8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array
  | Float32Array
  | Float64Array;

interface ArrayKind {
  bytes: number;
  make: (buffer: ArrayBuffer, byteOffset: number, length: number) => TypedArray;
}

const KINDS: Record<BufferDtype, ArrayKind> = {
  bool: { bytes: 1, make: (b, o, n) => new Uint8Array(b, o, n) },
  int8: { bytes: 1, make: (b, o, n) => new Int8Array(b, o, n) },
  uint8: { bytes: 1, make: (b, o, n) => new Uint8Array(b, o, n) },
  int16: { bytes: 2, make: (b, o, n) => new Int16Array(b, o, n) },
  uint16: { bytes: 2, make: (b, o, n) => new Uint16Array(b, o, n) },
  int32: { bytes: 4, make: (b, o, n) => new Int32Array(b, o, n) },
  uint32: { bytes: 4, make: (b, o, n) => new Uint32Array(b, o, n) },
  int64: { bytes: 8, make: (b, o, n) => new BigInt64Array(b, o, n) },
  uint64: { bytes: 8, make: (b, o, n) => new BigUint64Array(b, o, n) },
  float32: { bytes: 4, make: (b, o, n) => new Float32Array(b, o, n) },
  float64: { bytes: 8, make: (b, o, n) => new Float64Array(b, o, n) },
};

/** What a reply's buffers may be: DataViews from JupyterLab, ArrayBuffers elsewhere. */
export type WireBuffer = DataView | ArrayBuffer | ArrayBufferView;

export interface BufferRefLike {
  dtype: string;
  shape: readonly number[];
  buffer: number;
}

function isBufferDtype(dtype: string): dtype is BufferDtype {
  return Object.hasOwn(KINDS, dtype);
}

function bytesOf(buf: WireBuffer): { buffer: ArrayBuffer; offset: number; length: number } {
  if (buf instanceof ArrayBuffer) return { buffer: buf, offset: 0, length: buf.byteLength };
  if (!(buf.buffer instanceof ArrayBuffer)) throw new Error("shared buffers are not supported");
  return { buffer: buf.buffer, offset: buf.byteOffset, length: buf.byteLength };
}

/**
 * Returns the typed array that `ref` describes, viewing the buffer without a copy when
 * its offset is aligned, copying otherwise. Throws when the dtype is unknown, the
 * index is out of range, or the byte length differs from `prod(shape) * itemsize`.
 *
 * @example
 * const data = decodeBuffer({ dtype: "float32", shape: [2, 3], buffer: 0 }, buffers);
 */
export function decodeBuffer(ref: BufferRefLike, buffers: readonly WireBuffer[]): TypedArray {
  if (!isBufferDtype(ref.dtype)) throw new Error(`unsupported buffer dtype ${ref.dtype}`);
  const buf = buffers[ref.buffer];
  if (buf === undefined) {
    throw new Error(`buffer ${ref.buffer} is missing: the reply has ${buffers.length}`);
  }
  const kind = KINDS[ref.dtype];
  const length = ref.shape.reduce((a, b) => a * b, 1);
  const { buffer, offset, length: byteLength } = bytesOf(buf);
  if (byteLength !== length * kind.bytes) {
    throw new Error(
      `buffer ${ref.buffer} holds ${byteLength} bytes; ` +
        `${ref.dtype} of shape [${ref.shape.join(", ")}] needs ${length * kind.bytes}`,
    );
  }
  if (offset % kind.bytes === 0) return kind.make(buffer, offset, length);
  const copy = buffer.slice(offset, offset + byteLength);
  return kind.make(copy, 0, length);
}
