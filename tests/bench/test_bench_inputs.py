import numpy as np
import pytest

from conveyor.bench.inputs import InputSpec, ModelSpec, make_inputs, parse_shapes, resolve_shape


def test_parse_shapes():
    assert parse_shapes(["INPUT0:1,16", "x:5"]) == {"INPUT0": (1, 16), "x": (5,)}
    for bad in ("INPUT0", ":3", "INPUT0:a,b", "INPUT0:-1"):
        with pytest.raises(ValueError):
            parse_shapes([bad])


# (metadata shape, max_batch_size, batch, overrides, expected)
SHAPES = [
    ((-1, 16), 0, 1, {}, (1, 16)),
    ((-1, 16), 0, 4, {}, (4, 16)),  # the first dynamic dimension takes the batch size
    ((-1, 256), 64, 8, {}, (8, 256)),
    ((-1, 256), None, 2, {}, (2, 256)),  # a server that does not say (MLServer)
    ((-1,), 0, 1, {"INPUT0": (1048576,)}, (1048576,)),  # non-batching: the full shape
    ((-1, -1), 8, 2, {"INPUT0": (3,)}, (2, 3)),  # batching: without the batch dimension
    ((-1, -1, 3), 0, 1, {}, (1, 1, 3)),
]


@pytest.mark.parametrize(("shape", "max_batch", "batch", "overrides", "expected"), SHAPES)
def test_resolve_shape(shape, max_batch, batch, overrides, expected):
    spec = InputSpec("INPUT0", "FP32", shape)
    assert resolve_shape(spec, max_batch, batch, overrides) == expected


def test_batch_size_on_a_fixed_non_batching_input_is_an_error():
    with pytest.raises(ValueError, match="--batch-size"):
        resolve_shape(InputSpec("x", "FP32", (3, 4)), 0, 2, {})


MODEL = ModelSpec(
    "m",
    (
        InputSpec("f", "FP16", (-1, 4)),
        InputSpec("i", "INT32", (2,)),
        InputSpec("b", "BOOL", (3,)),
        InputSpec("s", "BYTES", (-1,)),
    ),
    ("out",),
    0,
)


@pytest.mark.parametrize("data", ["random", "zeros"])
def test_make_inputs_dtypes_and_shapes(data):
    inputs = make_inputs(MODEL, data=data)
    assert inputs["f"].dtype == np.float16 and inputs["f"].shape == (1, 4)
    assert inputs["i"].dtype == np.int32 and inputs["i"].shape == (2,)
    assert inputs["b"].dtype == np.bool_
    assert inputs["s"].dtype == object and all(isinstance(v, bytes) for v in inputs["s"])
    if data == "zeros":
        assert not inputs["f"].any()


def test_make_inputs_from_npz(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(
        path,
        f=np.ones((2, 4)),
        i=np.array([1, 2]),
        b=np.array([True, False, True]),
        s=np.array(["ab", "c"]),
    )
    inputs = make_inputs(MODEL, data=str(path))
    assert inputs["f"].dtype == np.float16 and inputs["f"].shape == (2, 4)
    assert inputs["s"].tolist() == [b"ab", b"c"]
    np.savez(path, f=np.ones((2, 4)))
    with pytest.raises(ValueError, match="no array"):
        make_inputs(MODEL, data=str(path))


def test_make_inputs_rejects_unknown_shape_names_and_files():
    with pytest.raises(ValueError, match="names no input"):
        make_inputs(MODEL, shapes={"nope": (1,)})
    with pytest.raises(ValueError, match=r"random, zeros or an \.npz"):
        make_inputs(MODEL, data="/no/such/file.npz")
