"""Parameter counts of a diffusion pipeline's components, counted from their config files.

Plain Python with no Django, like the estimator: each counter walks the module tree that the
library's class builds from its config (diffusers' `UNet2DConditionModel`,
`SD3Transformer2DModel`, `FluxTransformer2DModel` and `AutoencoderKL`; transformers'
`CLIPTextModel(WithProjection)`, `T5EncoderModel` and the Stable Diffusion safety checker's
CLIP vision tower) and adds up every weight and bias, with the class defaults where a config
leaves a field out. Besides the total it keeps what sizing needs: the parameters in
`nn.Linear` layers (what bitsandbytes, torchao and quanto quantize; convolutions, norms and
embeddings stay 16-bit), the largest single layer (what sequential offload holds at once),
the attention projections (where LoRA adapters go), and the shape facts the activations
depend on.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ComponentError(ValueError):
    """A component config we cannot count: `fields` names what is missing or wrong."""

    def __init__(self, message: str, fields: list[str], kind: str = "invalid", **params):
        super().__init__(message)
        self.fields = fields
        self.kind = kind  # what went wrong, for a message in the reader's language
        self.params = params


@dataclass
class Tally:
    """Parameters of one component as they are added, layer by layer."""

    params: int = 0
    linear: int = 0  # in nn.Linear layers (weights and biases)
    largest: int = 0  # the largest single leaf module
    buffers: int = 0  # persistent buffers saved with the weights (SD3's positional table)
    attention: list[tuple[int, int]] = field(default_factory=list)  # (in, out): LoRA targets

    def _leaf(self, n: int) -> None:
        self.params += n
        self.largest = max(self.largest, n)

    def linear_layer(self, n_in: int, n_out: int, *, bias: bool = True, lora: bool = False):
        n = n_in * n_out + (n_out if bias else 0)
        self._leaf(n)
        self.linear += n
        if lora:
            self.attention.append((n_in, n_out))

    def conv(self, c_in: int, c_out: int, kernel: int, *, bias: bool = True):
        self._leaf(c_in * c_out * kernel * kernel + (c_out if bias else 0))

    def norm(self, n: int, *, bias: bool = True):
        self._leaf(n * (2 if bias else 1))

    def table(self, rows: int, width: int):
        self._leaf(rows * width)


@dataclass(frozen=True)
class Component:
    """A counted component and what its memory depends on."""

    name: str  # the pipeline's name for it: unet, transformer, vae, text_encoder_2, …
    class_name: str
    role: str  # denoiser | text_encoder | vae | safety_checker
    parameters: int
    linear_parameters: int
    largest_layer: int
    buffers: int = 0
    lora_pairs: tuple[tuple[int, int], ...] = ()
    shape: dict = field(default_factory=dict, hash=False, compare=False)


def _get(config: dict, name: str, default=None, *, where: str):
    """A config field, the class default where it is left out, or an error naming it."""
    value = config.get(name, default)
    if value is None:
        raise ComponentError(f"{where}/config.json lacks {name}", [f"{where}.{name}"], "missing")
    return value


def _positive(config: dict, name: str, default=None, *, where: str) -> int:
    value = _get(config, name, default, where=where)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ComponentError(
            f"{where}/config.json: {name} must be a positive whole number",
            [f"{where}.{name}"],
            "positive",
        )
    return value


def _per_block(value, blocks: int, name: str, *, where: str) -> list:
    """An int (the same for every block) or a list with one value per block."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * blocks
    if isinstance(value, list) and len(value) == blocks:
        return list(value)
    raise ComponentError(
        f"{where}/config.json: {name} needs one value per block ({blocks})",
        [f"{where}.{name}"],
        "per_block",
        blocks=blocks,
    )


def _channel_list(config: dict, name: str, default, *, where: str) -> list[int]:
    value = _get(config, name, default, where=where)
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise ComponentError(
            f"{where}/config.json: {name} must be a list of positive whole numbers",
            [f"{where}.{name}"],
            "positive_list",
        )
    return value


# --- diffusers building blocks ---------------------------------------------------------


def _resnet(t: Tally, c_in: int, c_out: int, temb: int | None) -> None:
    """ResnetBlock2D: GroupNorm, 3×3 conv, time projection, GroupNorm, 3×3 conv, and a 1×1
    shortcut when the channels change."""
    t.norm(c_in)
    t.conv(c_in, c_out, 3)
    if temb:
        t.linear_layer(temb, c_out)
    t.norm(c_out)
    t.conv(c_out, c_out, 3)
    if c_in != c_out:
        t.conv(c_in, c_out, 1)


def _spatial_transformer(t: Tally, channels: int, layers: int, cross_dim: int) -> None:
    """Transformer2DModel as a UNet builds it: GroupNorm, projection in, `layers`
    BasicTransformerBlocks (self-attention, cross-attention, GEGLU feed-forward), projection
    out. The projections are linear with `use_linear_projection`, 1×1 convs otherwise: the
    same count."""
    c = channels
    t.norm(c)
    t.linear_layer(c, c)
    for _ in range(layers):
        t.norm(c)
        for _proj in range(3):
            t.linear_layer(c, c, bias=False, lora=True)
        t.linear_layer(c, c, lora=True)
        t.norm(c)
        t.linear_layer(c, c, bias=False, lora=True)
        t.linear_layer(cross_dim, c, bias=False, lora=True)
        t.linear_layer(cross_dim, c, bias=False, lora=True)
        t.linear_layer(c, c, lora=True)
        t.norm(c)
        t.linear_layer(c, 8 * c)  # GEGLU: two halves of 4c
        t.linear_layer(4 * c, c)
    t.linear_layer(c, c)


def _timestep_embedding(t: Tally, n_in: int, n_out: int) -> None:
    t.linear_layer(n_in, n_out)
    t.linear_layer(n_out, n_out)


CROSS_DOWN = {"CrossAttnDownBlock2D"}
PLAIN_DOWN = {"DownBlock2D"}
CROSS_UP = {"CrossAttnUpBlock2D"}
PLAIN_UP = {"UpBlock2D"}


def unet_2d_condition(config: dict, name: str = "unet") -> Component:
    """diffusers' UNet2DConditionModel (SD 1.x/2.x, SDXL base and refiner)."""
    w = name
    down = _get(config, "down_block_types", ["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"], where=w)
    up = _get(config, "up_block_types", ["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3, where=w)
    for kind in [*down, *up]:
        if kind not in CROSS_DOWN | PLAIN_DOWN | CROSS_UP | PLAIN_UP:
            raise ComponentError(
                f"{w}: unknown block type {kind!r}",
                [f"{w}.down_block_types"],
                "unknown_value",
                value=kind,
            )
    channels = _channel_list(config, "block_out_channels", [320, 640, 1280, 1280], where=w)
    n = len(channels)
    if len(down) != n or len(up) != n:
        raise ComponentError(
            f"{w}/config.json: down_block_types and up_block_types need one entry per "
            "block_out_channels", [f"{w}.block_out_channels"], "per_block", blocks=n,
        )  # fmt: skip
    layers = _per_block(
        _get(config, "layers_per_block", 2, where=w), n, "layers_per_block", where=w
    )
    heads = config.get("num_attention_heads") or _get(config, "attention_head_dim", 8, where=w)
    heads = _per_block(heads, n, "attention_head_dim", where=w)
    depth = _per_block(
        _get(config, "transformer_layers_per_block", 1, where=w), n,
        "transformer_layers_per_block", where=w,
    )  # fmt: skip
    cross = _positive(config, "cross_attention_dim", 1280, where=w)
    in_ch = _positive(config, "in_channels", 4, where=w)
    out_ch = _positive(config, "out_channels", 4, where=w)
    if config.get("mid_block_type", "UNetMidBlock2DCrossAttn") != "UNetMidBlock2DCrossAttn":
        raise ComponentError(
            f"{w}: unknown mid_block_type",
            [f"{w}.mid_block_type"],
            "unknown_value",
            value=config.get("mid_block_type"),
        )
    t = Tally()
    temb = channels[0] * 4
    t.conv(in_ch, channels[0], 3)
    _timestep_embedding(t, channels[0], temb)
    if config.get("addition_embed_type") == "text_time":
        _timestep_embedding(
            t, _positive(config, "projection_class_embeddings_input_dim", where=w), temb
        )
    elif config.get("addition_embed_type") is not None:
        raise ComponentError(
            f"{w}: unknown addition_embed_type",
            [f"{w}.addition_embed_type"],
            "unknown_value",
            value=config.get("addition_embed_type"),
        )
    levels = []  # (channels, downsampling so far, heads or 0, transformer layers)
    out = channels[0]
    for i, kind in enumerate(down):
        c_in, out = out, channels[i]
        for j in range(layers[i]):
            _resnet(t, c_in if j == 0 else out, out, temb)
            if kind in CROSS_DOWN:
                _spatial_transformer(t, out, depth[i], cross)
        if i < n - 1:
            t.conv(out, out, 3)
        levels.append((out, 2**i, heads[i] if kind in CROSS_DOWN else 0, depth[i]))
    mid = channels[-1]
    _resnet(t, mid, mid, temb)
    _spatial_transformer(t, mid, depth[-1], cross)
    _resnet(t, mid, mid, temb)
    reversed_channels = list(reversed(channels))
    reversed_layers = list(reversed(layers))
    reversed_depth = list(reversed(depth))
    prev = reversed_channels[0]
    for i, kind in enumerate(up):
        out = reversed_channels[i]
        c_in = reversed_channels[min(i + 1, n - 1)]
        count = reversed_layers[i] + 1
        for j in range(count):
            skip = c_in if j == count - 1 else out
            _resnet(t, (prev if j == 0 else out) + skip, out, temb)
            if kind in CROSS_UP:
                _spatial_transformer(t, out, reversed_depth[i], cross)
        if i < n - 1:
            t.conv(out, out, 3)
        prev = out
    t.norm(channels[0])
    t.conv(channels[0], out_ch, 3)
    return Component(
        name=name, class_name="UNet2DConditionModel", role="denoiser", parameters=t.params,
        linear_parameters=t.linear, largest_layer=t.largest, lora_pairs=tuple(t.attention),
        shape={"kind": "unet", "levels": levels, "cross_attention_dim": cross,
               "in_channels": in_ch},
    )  # fmt: skip


def _joint_attention(t: Tally, dim: int, inner: int, head_dim: int, *, added: bool,
                     out: bool, added_out: bool, qk_norm: bool) -> None:  # fmt: skip
    """diffusers' Attention as the MMDiTs build it: q, k, v (and the text stream's added
    q, k, v), the output projections, and RMSNorm over q and k per head."""
    for _proj in range(3):
        t.linear_layer(dim, inner, lora=True)
    if qk_norm:
        t.norm(head_dim, bias=False)
        t.norm(head_dim, bias=False)
    if added:
        for _proj in range(3):
            t.linear_layer(dim, inner)  # add_q/k/v_proj: not LoRA's to_q/to_k/to_v
        if qk_norm:
            t.norm(head_dim, bias=False)
            t.norm(head_dim, bias=False)
    if out:
        t.linear_layer(inner, dim, lora=True)
    if added and added_out:
        t.linear_layer(inner, dim)


def _feed_forward(t: Tally, dim: int) -> None:
    t.linear_layer(dim, 4 * dim)
    t.linear_layer(4 * dim, dim)


def sd3_transformer(config: dict, name: str = "transformer") -> Component:
    """diffusers' SD3Transformer2DModel: SD3 Medium, SD 3.5 Medium (MMDiT-X, dual attention
    in the first layers) and Large. Its positional table (`pos_embed`, pos_embed_max_size² ×
    inner) is a persistent buffer: saved with the weights, not a parameter."""
    w = name
    heads = _positive(config, "num_attention_heads", 18, where=w)
    head_dim = _positive(config, "attention_head_dim", 64, where=w)
    layers = _positive(config, "num_layers", 18, where=w)
    patch = _positive(config, "patch_size", 2, where=w)
    in_ch = _positive(config, "in_channels", 16, where=w)
    out_ch = _positive(config, "out_channels", in_ch, where=w)
    dual = config.get("dual_attention_layers") or []
    qk_norm = config.get("qk_norm") is not None
    inner = heads * head_dim
    t = Tally()
    t.conv(in_ch, inner, patch)
    pos_max = _positive(config, "pos_embed_max_size", 96, where=w)
    t.buffers = pos_max * pos_max * inner
    _timestep_embedding(t, 256, inner)
    _timestep_embedding(t, _positive(config, "pooled_projection_dim", 2048, where=w), inner)
    t.linear_layer(
        _positive(config, "joint_attention_dim", 4096, where=w),
        _positive(config, "caption_projection_dim", 1152, where=w),
    )
    for i in range(layers):
        last = i == layers - 1
        t.linear_layer(inner, (9 if i in dual else 6) * inner)  # AdaLayerNormZero(X)
        t.linear_layer(inner, (2 if last else 6) * inner)  # the text stream's norm
        _joint_attention(t, inner, inner, head_dim, added=True, out=True, added_out=not last,
                         qk_norm=qk_norm)  # fmt: skip
        if i in dual:
            _joint_attention(t, inner, inner, head_dim, added=False, out=True, added_out=False,
                             qk_norm=qk_norm)  # fmt: skip
        _feed_forward(t, inner)
        if not last:
            _feed_forward(t, inner)
    t.linear_layer(inner, 2 * inner)  # AdaLayerNormContinuous
    t.linear_layer(inner, patch * patch * out_ch)
    return Component(
        name=name, class_name="SD3Transformer2DModel", role="denoiser", parameters=t.params,
        linear_parameters=t.linear, largest_layer=t.largest, buffers=t.buffers,
        lora_pairs=tuple(t.attention),
        shape={"kind": "mmdit", "dim": inner, "heads": heads, "blocks": layers + len(dual),
               "patch": patch, "in_channels": in_ch},
    )  # fmt: skip


def flux_transformer(config: dict, name: str = "transformer") -> Component:
    """diffusers' FluxTransformer2DModel: double-stream blocks then single-stream blocks;
    FLUX.1 dev embeds the guidance scale, schnell does not."""
    w = name
    heads = _positive(config, "num_attention_heads", 24, where=w)
    head_dim = _positive(config, "attention_head_dim", 128, where=w)
    double = _positive(config, "num_layers", 19, where=w)
    single = _positive(config, "num_single_layers", 38, where=w)
    in_ch = _positive(config, "in_channels", 64, where=w)
    out_ch = config.get("out_channels") or in_ch
    patch = _positive(config, "patch_size", 1, where=w)
    inner = heads * head_dim
    t = Tally()
    _timestep_embedding(t, 256, inner)
    if config.get("guidance_embeds", False):
        _timestep_embedding(t, 256, inner)
    _timestep_embedding(t, _positive(config, "pooled_projection_dim", 768, where=w), inner)
    t.linear_layer(_positive(config, "joint_attention_dim", 4096, where=w), inner)
    t.linear_layer(in_ch, inner)
    for _ in range(double):
        t.linear_layer(inner, 6 * inner)
        t.linear_layer(inner, 6 * inner)
        _joint_attention(t, inner, inner, head_dim, added=True, out=True, added_out=True,
                         qk_norm=True)  # fmt: skip
        _feed_forward(t, inner)
        _feed_forward(t, inner)
    for _ in range(single):
        t.linear_layer(inner, 3 * inner)
        t.linear_layer(inner, 4 * inner)
        _joint_attention(t, inner, inner, head_dim, added=False, out=False, added_out=False,
                         qk_norm=True)  # fmt: skip
        t.linear_layer(5 * inner, inner)
    t.linear_layer(inner, 2 * inner)
    t.linear_layer(inner, patch * patch * out_ch)
    return Component(
        name=name, class_name="FluxTransformer2DModel", role="denoiser", parameters=t.params,
        linear_parameters=t.linear, largest_layer=t.largest, lora_pairs=tuple(t.attention),
        shape={"kind": "flux", "dim": inner, "heads": heads, "blocks": double + single,
               "patch": 2, "in_channels": in_ch // 4, "guidance_embeds":
               bool(config.get("guidance_embeds", False))},
    )  # fmt: skip


def _vae_attention(t: Tally, c: int) -> None:
    t.norm(c)
    for _proj in range(4):
        t.linear_layer(c, c)


def autoencoder_kl(config: dict, name: str = "vae") -> Component:
    """diffusers' AutoencoderKL: encoder, decoder, and the 1×1 quant convs unless the config
    drops them (SD3 and FLUX)."""
    w = name
    channels = _channel_list(config, "block_out_channels", [64], where=w)
    layers = _positive(config, "layers_per_block", 1, where=w)
    latent = _positive(config, "latent_channels", 4, where=w)
    in_ch = _positive(config, "in_channels", 3, where=w)
    out_ch = _positive(config, "out_channels", 3, where=w)
    for kind in config.get("down_block_types", ["DownEncoderBlock2D"] * len(channels)):
        if kind != "DownEncoderBlock2D":
            raise ComponentError(
                f"{w}: unknown block type {kind!r}",
                [f"{w}.down_block_types"],
                "unknown_value",
                value=kind,
            )
    for kind in config.get("up_block_types", ["UpDecoderBlock2D"] * len(channels)):
        if kind != "UpDecoderBlock2D":
            raise ComponentError(
                f"{w}: unknown block type {kind!r}",
                [f"{w}.up_block_types"],
                "unknown_value",
                value=kind,
            )
    if len(config.get("down_block_types", channels)) != len(channels):
        raise ComponentError(
            f"{w}/config.json: down_block_types needs one entry per block_out_channels",
            [f"{w}.down_block_types"],
            "per_block",
            blocks=len(channels),
        )
    t = Tally()
    # encoder
    t.conv(in_ch, channels[0], 3)
    out = channels[0]
    for i, c in enumerate(channels):
        c_in, out = out, c
        for j in range(layers):
            _resnet(t, c_in if j == 0 else out, out, None)
        if i < len(channels) - 1:
            t.conv(out, out, 3)
    _resnet(t, channels[-1], channels[-1], None)
    _vae_attention(t, channels[-1])
    _resnet(t, channels[-1], channels[-1], None)
    t.norm(channels[-1])
    t.conv(channels[-1], 2 * latent, 3)
    encoder = t.params
    if config.get("use_quant_conv", True):
        t.conv(2 * latent, 2 * latent, 1)
    if config.get("use_post_quant_conv", True):
        t.conv(latent, latent, 1)
    # decoder
    top = channels[-1]
    t.conv(latent, top, 3)
    _resnet(t, top, top, None)
    _vae_attention(t, top)
    _resnet(t, top, top, None)
    reversed_channels = list(reversed(channels))
    out = reversed_channels[0]
    for i, c in enumerate(reversed_channels):
        prev, out = out, c
        for j in range(layers + 1):
            _resnet(t, prev if j == 0 else out, out, None)
        if i < len(channels) - 1:
            t.conv(out, out, 3)
    t.norm(channels[0])
    t.conv(channels[0], out_ch, 3)
    sample = _positive(config, "sample_size", 32, where=w)
    return Component(
        name=name, class_name="AutoencoderKL", role="vae", parameters=t.params,
        linear_parameters=t.linear, largest_layer=t.largest,
        shape={"kind": "vae", "channels": channels, "factor": 2 ** (len(channels) - 1),
               "latent_channels": latent, "sample_size": sample,
               "force_upcast": bool(config.get("force_upcast", True)),
               "encoder_parameters": encoder},
    )  # fmt: skip


# --- transformers encoders -------------------------------------------------------------


def _clip_layers(t: Tally, h: int, i: int, layers: int) -> None:
    for _ in range(layers):
        for _proj in range(4):
            t.linear_layer(h, h)
        t.norm(h)
        t.linear_layer(h, i)
        t.linear_layer(i, h)
        t.norm(h)


def clip_text(config: dict, name: str, *, projection: bool) -> Component:
    """transformers' CLIPTextModel (and CLIPTextModelWithProjection: a bias-free text
    projection on top)."""
    w = name
    h = _positive(config, "hidden_size", 512, where=w)
    i = _positive(config, "intermediate_size", 2048, where=w)
    layers = _positive(config, "num_hidden_layers", 12, where=w)
    heads = _positive(config, "num_attention_heads", 8, where=w)
    positions = _positive(config, "max_position_embeddings", 77, where=w)
    t = Tally()
    t.table(_positive(config, "vocab_size", 49408, where=w), h)
    t.table(positions, h)
    _clip_layers(t, h, i, layers)
    t.norm(h)
    if projection:
        t.linear_layer(h, _positive(config, "projection_dim", 512, where=w), bias=False)
    return Component(
        name=name,
        class_name="CLIPTextModelWithProjection" if projection else "CLIPTextModel",
        role="text_encoder", parameters=t.params, linear_parameters=t.linear,
        largest_layer=t.largest,
        shape={"kind": "text", "hidden": h, "intermediate": i, "heads": heads,
               "tokens": positions},
    )  # fmt: skip


def t5_encoder(config: dict, name: str) -> Component:
    """transformers' T5EncoderModel: the shared embedding, self-attention (relative position
    bias in the first block), a gated-GELU or ReLU feed-forward, RMS-style layer norms."""
    w = name
    d = _positive(config, "d_model", 512, where=w)
    d_kv = _positive(config, "d_kv", 64, where=w)
    heads = _positive(config, "num_heads", 8, where=w)
    d_ff = _positive(config, "d_ff", 2048, where=w)
    layers = _positive(config, "num_layers", 6, where=w)
    gated = str(config.get("feed_forward_proj", "relu")).startswith("gated-")
    inner = heads * d_kv
    t = Tally()
    t.table(_positive(config, "vocab_size", 32128, where=w), d)
    for block in range(layers):
        for _proj in range(3):
            t.linear_layer(d, inner, bias=False)
        t.linear_layer(inner, d, bias=False)
        if block == 0:
            t.table(_positive(config, "relative_attention_num_buckets", 32, where=w), heads)
        t.norm(d, bias=False)
        for _proj in range(2 if gated else 1):
            t.linear_layer(d, d_ff, bias=False)
        t.linear_layer(d_ff, d, bias=False)
        t.norm(d, bias=False)
    t.norm(d, bias=False)
    return Component(
        name=name, class_name="T5EncoderModel", role="text_encoder", parameters=t.params,
        linear_parameters=t.linear, largest_layer=t.largest,
        shape={"kind": "text", "hidden": d, "intermediate": d_ff * (2 if gated else 1),
               "heads": heads, "tokens": 512},
    )  # fmt: skip


def safety_checker(config: dict, name: str = "safety_checker") -> Component:
    """The Stable Diffusion safety checker: a CLIP vision tower (`vision_config`), its
    projection and the concept embeddings it compares against."""
    w = name
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        raise ComponentError(
            f"{w}/config.json lacks vision_config", [f"{w}.vision_config"], "missing"
        )
    h = _positive(vision, "hidden_size", 768, where=w)
    i = _positive(vision, "intermediate_size", 3072, where=w)
    layers = _positive(vision, "num_hidden_layers", 12, where=w)
    patch = _positive(vision, "patch_size", 32, where=w)
    image = _positive(vision, "image_size", 224, where=w)
    projection = _positive(config, "projection_dim", 512, where=w)
    t = Tally()
    t.norm(h, bias=False)  # class embedding
    t.conv(3, h, patch, bias=False)
    t.table((image // patch) ** 2 + 1, h)
    t.norm(h)
    _clip_layers(t, h, i, layers)
    t.norm(h)
    t.linear_layer(h, projection, bias=False)
    t.table(17 + 3, projection)
    t.params += 17 + 3  # concept and special-care thresholds
    return Component(
        name=name, class_name="StableDiffusionSafetyChecker", role="safety_checker",
        parameters=t.params, linear_parameters=t.linear, largest_layer=t.largest,
        shape={"kind": "vision", "hidden": h, "intermediate": i, "tokens": (image // patch) ** 2 + 1},
    )  # fmt: skip


# class name in model_index.json → counter
COUNTERS = {
    "UNet2DConditionModel": lambda c, n: unet_2d_condition(c, n),
    "SD3Transformer2DModel": lambda c, n: sd3_transformer(c, n),
    "FluxTransformer2DModel": lambda c, n: flux_transformer(c, n),
    "AutoencoderKL": lambda c, n: autoencoder_kl(c, n),
    "CLIPTextModel": lambda c, n: clip_text(c, n, projection=False),
    "CLIPTextModelWithProjection": lambda c, n: clip_text(c, n, projection=True),
    "T5EncoderModel": lambda c, n: t5_encoder(c, n),
    "StableDiffusionSafetyChecker": lambda c, n: safety_checker(c, n),
}
# Components with no weights on the GPU: tokenizers, schedulers, image processors.
WEIGHTLESS = {
    "CLIPTokenizer", "CLIPTokenizerFast", "T5TokenizerFast", "T5Tokenizer",
    "CLIPImageProcessor", "CLIPFeatureExtractor", "PNDMScheduler", "EulerDiscreteScheduler",
    "FlowMatchEulerDiscreteScheduler", "DDIMScheduler", "LMSDiscreteScheduler",
    "EulerAncestralDiscreteScheduler", "DPMSolverMultistepScheduler",
}  # fmt: skip
