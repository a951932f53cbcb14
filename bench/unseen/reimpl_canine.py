"""A faithful torch 1.13 reimplementation of CANINE (CanineModel; a case of capture_reimpl.py: its docstring says how
a case is built and captured: random ids, weights redrawn by weights.py's randomize, model(ids), last_hidden_state).

canine follows huggingface/transformers src/transformers/models/canine/modeling_canine.py at commit
004edfe2dc0fdbc94068d7977605aa6798de787e (CanineModel with its pooler, add_pooling_layer True; the transformers 5
form: CanineSelfAttention's projections viewed per head inline, CanineLayer a GradientCheckpointingLayer, the
encoders returning BaseModelOutput, whose only set field is last_hidden_state) and configuration_canine.py at commit
053f59efe493c4f815f39f836494a1f2f73fbe0b (CanineConfig) with its defaults but for the sizes: hidden_size 64,
num_attention_heads 4 (of 16), num_hidden_layers 2 (the deep encoder; the two shallow char encoders have 1 layer
each, as CanineModel's deepcopied shallow_config gives), intermediate_size 96, num_hash_buckets 64 (default 16384),
max_position_embeddings 64 (default 16384). Defaults kept: hidden_act "gelu" (erf GELU, GELUActivation as its own
module call), layer_norm_eps 1e-12, type_vocab_size 16, downsampling_rate 4, upsampling_kernel_size 4,
num_hash_functions 8, local_transformer_stride 128, chunk_size_feed_forward 0 (apply_chunking_to_forward calls
feed_forward_chunk once), dropouts 0.1 (nn.Dropout modules, identity in eval). The request: 12 codepoints drawn in
[0, 1000) (vocab_size here is only the capture's id range: CANINE has no vocabulary), no attention mask (ones, as
the default call makes it), no token types (zeros). What it shows:
  - character embeddings by multiple hashing: for each of 8 primes p (31, 43, 59, 61, 73, 97, 103, 113) the bucket
    ((id + 1)·p) mod 64 looks up its own table HashBucketCodepointEmbedder_i [64, 64/8 = 8]; the 8 shards are
    concatenated along the width (shard i = columns 8i…8i+7); plus token_type_embeddings at 0, plus
    char_position_embeddings (a table of num_hash_buckets rows) at arange(12) (+= in place), LayerNorm, dropout;
  - initial_char_encoder: one BERT post-norm layer with local attention (attend_from/attend_to chunks of width and
    stride local_transformer_stride = 128, neither always_attend_to_first_position nor first_position_attends_to_all):
    at 12 characters there is one chunk (0, 12) on both sides, so CanineSelfAttention is called once on the slices
    [:, 0:12] of the rows with the slice [:, 0:12, 0:12] of the 3-D mask ones(B, 12, 1)·mask[:, None, :], which the
    attention turns into (1 − m)·finfo.min itself (ndim 3 → unsqueeze(1)); the chunks' outputs concatenated (one);
    scores q·kᵀ / √16, softmax, dropout, ·v; the SelfOutput dense + LayerNorm(x + residual); GELU FFN likewise;
  - chars_to_molecules: the CLS row (char 0) kept aside; Conv1d(64, 64, kernel 4, stride 4) over the
    [B, 64, 12] transposed chars → 3 molecules, transposed back, GELU; the last molecule dropped, the CLS row put in
    front (3 molecules), LayerNorm (no residual);
  - the deep encoder: 2 BERT post-norm layers over the 3 molecules with the molecule mask: the char mask max-pooled
    by an nn.MaxPool1d(4, 4) made inside forward (not a submodule, so no call of it is captured, as upstream),
    squeeze(-1) (a no-op at 3 molecules: [B, 1, 3]), get_extended_attention_mask's 3-D branch [:, None, :, :] and
    (1 − m)·finfo(f32).min; the pooler (dense + tanh over molecule 0) called on its output;
  - upsampling: _repeat_molecules drops molecule 0 (CLS), repeat_interleave's each other molecule 4 times (8 rows),
    then the last molecule repeated (12 mod 4) + 4 = 4 times (the truncated one's place): 12 rows; concatenated after
    the initial char encoding along the width ([B, 12, 128]: chars first);
  - projection (ConvProjection): transposed, zero padded by an nn.ConstantPad1d((1, 2), 0) made inside forward
    ("same" padding for kernel 4: pad_total 3, 1 before, 2 after; not a submodule, no call captured), Conv1d(128, 64,
    kernel 4, stride 1), transposed back, GELU, LayerNorm, dropout;
  - final_char_encoder: one BERT post-norm layer, full attention over the 12 characters with the 2-D extended mask
    [:, None, None, :]; its output is last_hidden_state; pooler_output is the deep encoder's pooled CLS molecule.
Not reproduced from the real class: PreTrainedModel's machinery (post_init's initialisation is replaced by
randomize; warn_if_padding_and_no_attention_mask only warns; get_extended_attention_mask is written out below as
modeling_utils' ModuleUtilsMixin does it for an encoder, dtype the parameters' f32).
"""
import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

# Support up to 16 hash functions.
_PRIMES = [31, 43, 59, 61, 73, 97, 103, 113, 137, 149, 157, 173, 181, 193, 211, 223]


class CanineConfig:
    hidden_size, num_hidden_layers, num_attention_heads, intermediate_size = 64, 2, 4, 96
    hidden_act, hidden_dropout_prob, attention_probs_dropout_prob = "gelu", 0.1, 0.1
    max_position_embeddings, type_vocab_size, layer_norm_eps = 64, 16, 1e-12
    downsampling_rate, upsampling_kernel_size, num_hash_functions, num_hash_buckets = 4, 4, 8, 64
    local_transformer_stride, chunk_size_feed_forward = 128, 0
    output_attentions, output_hidden_states, use_return_dict, is_decoder = False, False, True, False
    vocab_size = 1000  # the capture's codepoint range (ids drawn in [0, vocab_size)); not a CanineConfig field
    seq_len = 12


class GELUActivation(nn.Module):
    """transformers' ACT2FN["gelu"]: nn.functional.gelu (erf), a fresh module instance at each ACT2FN lookup."""

    def forward(self, input):
        return F.gelu(input)


class CanineEmbeddings(nn.Module):
    """Construct the character, position and token_type embeddings."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        # character embeddings
        shard_embedding_size = config.hidden_size // config.num_hash_functions
        for i in range(config.num_hash_functions):
            name = f"HashBucketCodepointEmbedder_{i}"
            setattr(self, name, nn.Embedding(config.num_hash_buckets, shard_embedding_size))
        self.char_position_embeddings = nn.Embedding(config.num_hash_buckets, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer(
            "position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)), persistent=False
        )

    def _hash_bucket_tensors(self, input_ids, num_hashes, num_buckets):
        if num_hashes > len(_PRIMES):
            raise ValueError(f"`num_hashes` must be <= {len(_PRIMES)}")
        primes = _PRIMES[:num_hashes]
        result_tensors = []
        for prime in primes:
            hashed = ((input_ids + 1) * prime) % num_buckets
            result_tensors.append(hashed)
        return result_tensors

    def _embed_hash_buckets(self, input_ids, embedding_size, num_hashes, num_buckets):
        if embedding_size % num_hashes != 0:
            raise ValueError(f"Expected `embedding_size` ({embedding_size}) % `num_hashes` ({num_hashes}) == 0")
        hash_bucket_tensors = self._hash_bucket_tensors(input_ids, num_hashes=num_hashes, num_buckets=num_buckets)
        embedding_shards = []
        for i, hash_bucket_ids in enumerate(hash_bucket_tensors):
            name = f"HashBucketCodepointEmbedder_{i}"
            shard_embeddings = getattr(self, name)(hash_bucket_ids)
            embedding_shards.append(shard_embeddings)
        return torch.cat(embedding_shards, dim=-1)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        if input_ids is not None:
            input_shape = input_ids.size()
        else:
            input_shape = inputs_embeds.size()[:-1]
        seq_length = input_shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros(input_shape, dtype=torch.long, device=self.position_ids.device)
        if inputs_embeds is None:
            inputs_embeds = self._embed_hash_buckets(
                input_ids, self.config.hidden_size, self.config.num_hash_functions, self.config.num_hash_buckets
            )
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.char_position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class CharactersToMolecules(nn.Module):
    """Convert character sequence to initial molecule sequence (i.e. downsample) using strided convolutions."""

    def __init__(self, config):
        super().__init__()
        self.conv = nn.Conv1d(
            in_channels=config.hidden_size,
            out_channels=config.hidden_size,
            kernel_size=config.downsampling_rate,
            stride=config.downsampling_rate,
        )
        self.activation = GELUActivation()
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, char_encoding):
        # `cls_encoding`: [batch, 1, hidden_size]
        cls_encoding = char_encoding[:, 0:1, :]
        # [batch, char_seq, hidden_size] -> [batch, hidden_size, char_seq]
        char_encoding = torch.transpose(char_encoding, 1, 2)
        downsampled = self.conv(char_encoding)
        downsampled = torch.transpose(downsampled, 1, 2)
        downsampled = self.activation(downsampled)
        # Truncate the last molecule in order to reserve a position for [CLS].
        downsampled_truncated = downsampled[:, 0:-1, :]
        # `result`: [batch, molecule_seq, molecule_dim]
        result = torch.cat([cls_encoding, downsampled_truncated], dim=1)
        result = self.LayerNorm(result)
        return result


class ConvProjection(nn.Module):
    """Project representations from hidden_size*2 back to hidden_size across a window of upsampling_kernel_size
    characters."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.conv = nn.Conv1d(
            in_channels=config.hidden_size * 2,
            out_channels=config.hidden_size,
            kernel_size=config.upsampling_kernel_size,
            stride=1,
        )
        self.activation = GELUActivation()
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, inputs, final_seq_char_positions=None):
        # [batch, mol_seq, molecule_hidden_size+char_hidden_final] -> [batch, ..., mol_seq]
        inputs = torch.transpose(inputs, 1, 2)
        # "same" padding by hand (as upstream does for PyTorch < 1.9)
        pad_total = self.config.upsampling_kernel_size - 1
        pad_beg = pad_total // 2
        pad_end = pad_total - pad_beg
        pad = nn.ConstantPad1d((pad_beg, pad_end), 0)
        # `result`: shape (batch_size, char_seq_len, hidden_size)
        result = self.conv(pad(inputs))
        result = torch.transpose(result, 1, 2)
        result = self.activation(result)
        result = self.LayerNorm(result)
        result = self.dropout(result)
        final_char_seq = result
        if final_seq_char_positions is not None:
            raise NotImplementedError("CanineForMaskedLM is currently not supported")
        else:
            query_seq = final_char_seq
        return query_seq


class CanineSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, from_tensor, to_tensor, attention_mask=None, output_attentions=False):
        batch_size, seq_length, _ = from_tensor.shape
        key_layer = (
            self.key(to_tensor)
            .view(batch_size, -1, self.num_attention_heads, self.attention_head_size)
            .transpose(1, 2)
        )
        value_layer = (
            self.value(to_tensor)
            .view(batch_size, -1, self.num_attention_heads, self.attention_head_size)
            .transpose(1, 2)
        )
        query_layer = (
            self.query(from_tensor)
            .view(batch_size, -1, self.num_attention_heads, self.attention_head_size)
            .transpose(1, 2)
        )
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            if attention_mask.ndim == 3:
                attention_mask = torch.unsqueeze(attention_mask, dim=1)
                attention_mask = (1.0 - attention_mask.float()) * torch.finfo(attention_scores.dtype).min
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(*new_context_layer_shape)
        outputs = (context_layer, attention_probs) if output_attentions else (context_layer,)
        return outputs


class CanineSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class CanineAttention(nn.Module):
    def __init__(self, config, local=False, always_attend_to_first_position=False, first_position_attends_to_all=False,
                 attend_from_chunk_width=128, attend_from_chunk_stride=128, attend_to_chunk_width=128,
                 attend_to_chunk_stride=128):
        super().__init__()
        self.self = CanineSelfAttention(config)
        self.output = CanineSelfOutput(config)
        self.local = local
        if attend_from_chunk_width < attend_from_chunk_stride:
            raise ValueError("`attend_from_chunk_width` < `attend_from_chunk_stride` would skip positions.")
        if attend_to_chunk_width < attend_to_chunk_stride:
            raise ValueError("`attend_to_chunk_width` < `attend_to_chunk_stride` would skip positions.")
        self.always_attend_to_first_position = always_attend_to_first_position
        self.first_position_attends_to_all = first_position_attends_to_all
        self.attend_from_chunk_width = attend_from_chunk_width
        self.attend_from_chunk_stride = attend_from_chunk_stride
        self.attend_to_chunk_width = attend_to_chunk_width
        self.attend_to_chunk_stride = attend_to_chunk_stride

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        if not self.local:
            self_outputs = self.self(hidden_states, hidden_states, attention_mask, output_attentions)
            attention_output = self_outputs[0]
        else:
            from_seq_length = to_seq_length = hidden_states.shape[1]
            from_tensor = to_tensor = hidden_states

            # Create chunks (windows) that we will attend *from* and then concatenate them.
            from_chunks = []
            if self.first_position_attends_to_all:
                from_chunks.append((0, 1))
                from_start = 1
            else:
                from_start = 0
            for chunk_start in range(from_start, from_seq_length, self.attend_from_chunk_stride):
                chunk_end = min(from_seq_length, chunk_start + self.attend_from_chunk_width)
                from_chunks.append((chunk_start, chunk_end))

            # Determine the chunks (windows) that will attend *to*.
            to_chunks = []
            if self.first_position_attends_to_all:
                to_chunks.append((0, to_seq_length))
            for chunk_start in range(0, to_seq_length, self.attend_to_chunk_stride):
                chunk_end = min(to_seq_length, chunk_start + self.attend_to_chunk_width)
                to_chunks.append((chunk_start, chunk_end))

            if len(from_chunks) != len(to_chunks):
                raise ValueError(f"Expected to have same number of `from_chunks` ({from_chunks}) and `to_chunks`.")

            attention_output_chunks = []
            attention_probs_chunks = []
            for (from_start, from_end), (to_start, to_end) in zip(from_chunks, to_chunks):
                from_tensor_chunk = from_tensor[:, from_start:from_end, :]
                to_tensor_chunk = to_tensor[:, to_start:to_end, :]
                attention_mask_chunk = attention_mask[:, from_start:from_end, to_start:to_end]
                if self.always_attend_to_first_position:
                    cls_attention_mask = attention_mask[:, from_start:from_end, 0:1]
                    attention_mask_chunk = torch.cat([cls_attention_mask, attention_mask_chunk], dim=2)
                    cls_position = to_tensor[:, 0:1, :]
                    to_tensor_chunk = torch.cat([cls_position, to_tensor_chunk], dim=1)
                attention_outputs_chunk = self.self(
                    from_tensor_chunk, to_tensor_chunk, attention_mask_chunk, output_attentions
                )
                attention_output_chunks.append(attention_outputs_chunk[0])
                if output_attentions:
                    attention_probs_chunks.append(attention_outputs_chunk[1])
            attention_output = torch.cat(attention_output_chunks, dim=1)

        attention_output = self.output(attention_output, hidden_states)
        outputs = (attention_output,)
        if not self.local:
            outputs = outputs + self_outputs[1:]
        else:
            outputs = outputs + tuple(attention_probs_chunks)
        return outputs


class CanineIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        return hidden_states


class CanineOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class CanineLayer(nn.Module):
    def __init__(self, config, local, always_attend_to_first_position, first_position_attends_to_all,
                 attend_from_chunk_width, attend_from_chunk_stride, attend_to_chunk_width, attend_to_chunk_stride):
        super().__init__()
        self.chunk_size_feed_forward = config.chunk_size_feed_forward
        self.seq_len_dim = 1
        self.attention = CanineAttention(
            config, local, always_attend_to_first_position, first_position_attends_to_all,
            attend_from_chunk_width, attend_from_chunk_stride, attend_to_chunk_width, attend_to_chunk_stride,
        )
        self.intermediate = CanineIntermediate(config)
        self.output = CanineOutput(config)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        self_attention_outputs = self.attention(hidden_states, attention_mask, output_attentions=output_attentions)
        attention_output = self_attention_outputs[0]
        outputs = self_attention_outputs[1:]
        # apply_chunking_to_forward with chunk_size 0: one call of feed_forward_chunk
        layer_output = self.feed_forward_chunk(attention_output)
        outputs = (layer_output,) + outputs
        return outputs

    def feed_forward_chunk(self, attention_output):
        intermediate_output = self.intermediate(attention_output)
        layer_output = self.output(intermediate_output, attention_output)
        return layer_output


class CanineEncoder(nn.Module):
    def __init__(self, config, local=False, always_attend_to_first_position=False, first_position_attends_to_all=False,
                 attend_from_chunk_width=128, attend_from_chunk_stride=128, attend_to_chunk_width=128,
                 attend_to_chunk_stride=128):
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList([
            CanineLayer(config, local, always_attend_to_first_position, first_position_attends_to_all,
                        attend_from_chunk_width, attend_from_chunk_stride, attend_to_chunk_width,
                        attend_to_chunk_stride)
            for _ in range(config.num_hidden_layers)
        ])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, output_hidden_states=False,
                return_dict=True):
        for i, layer_module in enumerate(self.layer):
            layer_outputs = layer_module(hidden_states, attention_mask, output_attentions)
            hidden_states = layer_outputs[0]
        # BaseModelOutput(last_hidden_state=..., hidden_states=None, attentions=None): a mapping of its set field
        return {"last_hidden_state": hidden_states}


class CaninePooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        pooled_output = self.dense(first_token_tensor)
        pooled_output = self.activation(pooled_output)
        return pooled_output


class CanineModel(nn.Module):
    def __init__(self, config, add_pooling_layer=True):
        super().__init__()
        self.config = config
        shallow_config = copy.deepcopy(config)
        shallow_config.num_hidden_layers = 1

        self.char_embeddings = CanineEmbeddings(config)
        # shallow/low-dim transformer encoder to get a initial character encoding
        self.initial_char_encoder = CanineEncoder(
            shallow_config,
            local=True,
            always_attend_to_first_position=False,
            first_position_attends_to_all=False,
            attend_from_chunk_width=config.local_transformer_stride,
            attend_from_chunk_stride=config.local_transformer_stride,
            attend_to_chunk_width=config.local_transformer_stride,
            attend_to_chunk_stride=config.local_transformer_stride,
        )
        self.chars_to_molecules = CharactersToMolecules(config)
        # deep transformer encoder
        self.encoder = CanineEncoder(config)
        self.projection = ConvProjection(config)
        # shallow/low-dim transformer encoder to get a final character encoding
        self.final_char_encoder = CanineEncoder(shallow_config)
        self.pooler = CaninePooler(config) if add_pooling_layer else None

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def get_extended_attention_mask(self, attention_mask, input_shape, device=None, dtype=None):
        """modeling_utils' ModuleUtilsMixin.get_extended_attention_mask for an encoder (is_decoder False)."""
        if dtype is None:
            dtype = self.dtype
        if attention_mask.dim() == 3:
            extended_attention_mask = attention_mask[:, None, :, :]
        elif attention_mask.dim() == 2:
            extended_attention_mask = attention_mask[:, None, None, :]
        else:
            raise ValueError(f"Wrong shape for input_ids (shape {input_shape}) or attention_mask")
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def _create_3d_attention_mask_from_input_mask(self, from_tensor, to_mask):
        batch_size, from_seq_length = from_tensor.shape[0], from_tensor.shape[1]
        to_seq_length = to_mask.shape[1]
        to_mask = torch.reshape(to_mask, (batch_size, 1, to_seq_length)).float()
        broadcast_ones = torch.ones(size=(batch_size, from_seq_length, 1), dtype=torch.float32, device=to_mask.device)
        mask = broadcast_ones * to_mask
        return mask

    def _downsample_attention_mask(self, char_attention_mask, downsampling_rate):
        batch_size, char_seq_len = char_attention_mask.shape
        poolable_char_mask = torch.reshape(char_attention_mask, (batch_size, 1, char_seq_len))
        # an nn.MaxPool1d made here, not a submodule: its call is not hooked (as upstream)
        pooled_molecule_mask = torch.nn.MaxPool1d(kernel_size=downsampling_rate, stride=downsampling_rate)(
            poolable_char_mask.float()
        )
        molecule_attention_mask = torch.squeeze(pooled_molecule_mask, dim=-1)
        return molecule_attention_mask

    def _repeat_molecules(self, molecules, char_seq_length):
        rate = self.config.downsampling_rate
        molecules_without_extra_cls = molecules[:, 1:, :]
        # `repeated`: [batch_size, almost_char_seq_len, molecule_hidden_size]
        repeated = torch.repeat_interleave(molecules_without_extra_cls, repeats=rate, dim=-2)
        last_molecule = molecules[:, -1:, :]
        remainder_length = char_seq_length % rate
        remainder_repeated = torch.repeat_interleave(
            last_molecule,
            # +1 molecule to compensate for truncation.
            repeats=remainder_length + rate,
            dim=-2,
        )
        # `repeated`: [batch_size, char_seq_len, molecule_hidden_size]
        return torch.cat([repeated, remainder_repeated], dim=-2)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, inputs_embeds=None,
                output_attentions=None, output_hidden_states=None, return_dict=None):
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.use_return_dict

        if input_ids is not None and inputs_embeds is not None:
            raise ValueError("You cannot specify both input_ids and inputs_embeds at the same time")
        elif input_ids is not None:
            input_shape = input_ids.size()
        elif inputs_embeds is not None:
            input_shape = inputs_embeds.size()[:-1]
        else:
            raise ValueError("You have to specify either input_ids or inputs_embeds")

        batch_size, seq_length = input_shape
        device = input_ids.device if input_ids is not None else inputs_embeds.device

        if attention_mask is None:
            attention_mask = torch.ones(((batch_size, seq_length)), device=device)
        if token_type_ids is None:
            token_type_ids = torch.zeros(input_shape, dtype=torch.long, device=device)

        extended_attention_mask = self.get_extended_attention_mask(attention_mask, input_shape)
        molecule_attention_mask = self._downsample_attention_mask(
            attention_mask, downsampling_rate=self.config.downsampling_rate
        )
        extended_molecule_attention_mask = self.get_extended_attention_mask(
            molecule_attention_mask, (batch_size, molecule_attention_mask.shape[-1])
        )

        # `input_char_embeddings`: shape (batch_size, char_seq, char_dim)
        input_char_embeddings = self.char_embeddings(
            input_ids=input_ids,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            inputs_embeds=inputs_embeds,
        )

        # Contextualize character embeddings using shallow Transformer (a 3D mask for the local attention).
        char_attention_mask = self._create_3d_attention_mask_from_input_mask(
            input_ids if input_ids is not None else inputs_embeds, attention_mask
        )
        init_chars_encoder_outputs = self.initial_char_encoder(
            input_char_embeddings,
            attention_mask=char_attention_mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        input_char_encoding = init_chars_encoder_outputs["last_hidden_state"]

        # Downsample chars to molecules.
        init_molecule_encoding = self.chars_to_molecules(input_char_encoding)

        # Deep BERT encoder
        encoder_outputs = self.encoder(
            init_molecule_encoding,
            attention_mask=extended_molecule_attention_mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=return_dict,
        )
        molecule_sequence_output = encoder_outputs["last_hidden_state"]
        pooled_output = self.pooler(molecule_sequence_output) if self.pooler is not None else None

        # Upsample molecules back to characters.
        repeated_molecules = self._repeat_molecules(molecule_sequence_output, char_seq_length=input_shape[-1])

        # Concatenate representations (contextualized char embeddings and repeated molecules)
        concat = torch.cat([input_char_encoding, repeated_molecules], dim=-1)

        # Project representation dimension back to hidden_size
        sequence_output = self.projection(concat)

        # Apply final shallow Transformer
        final_chars_encoder_outputs = self.final_char_encoder(
            sequence_output,
            attention_mask=extended_attention_mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        sequence_output = final_chars_encoder_outputs["last_hidden_state"]

        # CanineModelOutputWithPooling: its set fields
        return {"last_hidden_state": sequence_output, "pooler_output": pooled_output}


CASES = {"canine": (CanineModel, CanineConfig)}
