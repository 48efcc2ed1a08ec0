"""PyTorch's and Python's semantics, written once as facts: what an API returns, what detaches, what carries a
graph, where gradients accumulate. The kinds engine and the model read these tables; rules never keep their own.
"""

from __future__ import annotations

import re

# Builtins and standard-library calls whose result is a Python number or bool (never a tensor).
NUMBER_FUNCTIONS = frozenset(
    """len int float round bool ord hash id isinstance issubclass callable hasattr
    time.time time.perf_counter time.monotonic time.process_time time.time_ns time.perf_counter_ns
    math.sqrt math.log math.exp math.ceil math.floor math.cos math.sin math.pi math.isnan math.isinf math.fabs
    os.path.exists os.path.isdir os.path.isfile os.path.getsize os.cpu_count
    random.random random.randint random.uniform""".split()
)
STRING_FUNCTIONS = frozenset(
    """str repr format chr input os.path.join os.path.basename os.path.dirname os.path.abspath os.path.realpath
    os.path.expanduser os.path.relpath os.getcwd os.getenv time.strftime datetime.now json.dumps""".split()
)
# The learning rate an optimizer applies: `opt.param_groups[i]["lr"]`, or a scheduler's `get_last_lr()`.
PARAM_GROUPS = "param_groups"
LR_KEY = "lr"
LAST_LR_METHOD = "get_last_lr"
# argparse: the call that defines a command-line option, and those that return the parsed options.
ARGPARSE_ADD = "add_argument"
ARGPARSE_PARSE = frozenset({"parse_args"})
# Names that are Python's constants, not variables: never a value from outside (`requires_grad_(True)`).
CONSTANT_NAMES = frozenset({"True", "False", "None"})
CONTAINER_FUNCTIONS = frozenset("list dict tuple set frozenset sorted zip enumerate range reversed vars".split())
# Methods whose result is a Python number / string / container, whatever the receiver.
NUMBER_METHODS = frozenset("item numel dim ndimension element_size nelement get_last_lr".split())
STRING_METHODS = frozenset("format join replace strip lower upper lstrip rstrip split_ext".split())
CONTAINER_METHODS = frozenset("tolist keys values items split chunk size".split())
# Methods whose result holds values without a graph, whatever the receiver: `Tensor.numpy()` returns an ndarray
# (and raises on a tensor that requires grad).
DATA_METHODS = frozenset({"numpy"})

# Tensor methods that return a tensor attached to the same graph as the receiver.
GRAPH_PRESERVING_METHODS = frozenset(
    """to cuda cpu float double half bfloat16 long int sum mean max min abs view reshape squeeze unsqueeze
    permute transpose contiguous flatten clone exp log sqrt pow neg sigmoid tanh relu softmax log_softmax norm
    expand expand_as repeat t masked_fill clamp type_as narrow select gather index_select unbind
    mul add sub div matmul mm bmm""".split()
)
IN_PLACE_DETACH = frozenset({"detach_"})
# torch.* functions that build a tensor from data (no graph unless `requires_grad=True`).
TENSOR_CONSTRUCTORS = frozenset(
    """tensor as_tensor from_numpy zeros ones empty full zeros_like ones_like empty_like full_like rand randn
    randint randperm arange linspace logspace eye LongTensor FloatTensor Tensor IntTensor BoolTensor""".split()
)
# Modules of functions that compute on tensors: the result has a graph when an argument has one.
TENSOR_FUNCTION_MODULES = ("torch", "torch.nn.functional", "F", "nn.functional", "torch.linalg", "torch.special")
MODULE_NAMESPACES = ("nn", "torch.nn")  # `nn.Linear(...)`, `torch.nn.CrossEntropyLoss()` build modules
# Wrappers that return the module they are given (or a module wrapping it).
MODULE_WRAPPERS = frozenset(
    "DDP DistributedDataParallel DataParallel FSDP FullyShardedDataParallel compile torch.compile".split()
)
# Methods of a `torch.distributions` distribution whose result carries the graph of its parameters (a policy's
# `dist.log_prob(action)`, `dist.entropy()`, a reparameterised `dist.rsample()`).
DISTRIBUTION_GRAPH_METHODS = frozenset({"log_prob", "entropy", "rsample"})
# `torch.distributions` classes (by class name), whose parameters a policy computes
DISTRIBUTIONS = frozenset("""Bernoulli Beta Binomial Categorical Cauchy Dirichlet Exponential Gamma Geometric Gumbel
    Independent Laplace LogNormal MixtureSameFamily Multinomial MultivariateNormal Normal OneHotCategorical Poisson
    RelaxedBernoulli RelaxedOneHotCategorical StudentT TransformedDistribution Uniform VonMises""".split())
# Attributes of a module that are its parameters (leaf tensors that require grad).
PARAMETER_ATTRIBUTES = frozenset({"weight", "bias"})
MODULE_METHODS_RETURNING_MODULE = frozenset("to cuda cpu train eval half float double bfloat16 requires_grad_".split())

# Conventional names of modules (models, criteria) when nothing in the file says what the name holds: training
# functions receive them as parameters. A value called through such a name is a forward with a graph.
_MODULE_NAME = re.compile(
    r"^(model|net|network|module|criterion|crit|loss_fn|lossfn|loss_func|loss_function|generator|discriminator"
    r"|critic|encoder|decoder|student|teacher|backbone|classifier|policy|actor|value_net|q_net"
    r"|rnn|lstm|gru|cell|transformer|lm|vae|unet|[a-z0-9]+_(rnn|lstm|gru|encoder|decoder)"
    r"|bce|mse|ce|nll|l1|kld?|huber|smooth_l1|cross_entropy|bce_loss|mse_loss|ce_loss|nll_loss"
    r"|net[_]?[a-z0-9]|model[_]?[a-z0-9]+|[a-z0-9]+_(model|net|criterion))$"
)
# Conventional names of a loss: a value so named, from a call the analysis cannot resolve, is a graph tensor.
_LOSS_NAME = re.compile(r"^(loss|losses|[a-z0-9_]*_loss|loss_[a-z0-9_]+|[a-z]?loss[a-z0-9]*)$")


# `build_model`, `evaluate_model`: functions about a model, not a model.
_VERB_PREFIX = re.compile(
    r"^(get|build|create|load|save|evaluate|eval|train|init|make|run|test|setup|prepare|wrap|compile|export"
    r"|freeze|unfreeze|print|log|update|copy|clone|to|move|convert|check|validate|fit|predict)_"
)


# Words in the name of a function whose result is a loss (`criterion(out, y)`, `F.cross_entropy(...)`).
# A tensor's attributes and methods that read its shape or placement: what they give carries no graph
SHAPE_READS = frozenset({"size", "shape", "dim", "ndim", "numel", "device", "dtype"})

LOSS_FUNCTION_WORDS = ("loss", "criterion", "crit", "cross_entropy", "mse", "nll", "bce", "l1", "huber", "kl_div")


# Names of a function or a criterion (`loss_fn`, `adv_loss_func`, `criterion`): what they hold is called, never a
# tensor, even when the name says "loss".
_CALLABLE_NAME = re.compile(r"(^|_)(fn|fns|func|funcs|function|functions|criterion|crit)$")


def is_callable_name(name: str) -> bool:
    return _CALLABLE_NAME.search(name.rsplit(".", 1)[-1].lower()) is not None


# Words of a loss function's last name, split at underscores (`recon_crit`, `mse`, `loss`; not `critic`)
_LOSS_WORDS = frozenset({"loss", "criterion", "crit", "mse", "nll", "bce", "l1", "huber", "similarity"})


def computes_loss(func: str) -> bool:
    """A called name that says it computes a loss from its arguments, the prediction first (`criterion(out, y)`,
    `F.mse_loss`, `self.recon_crit`, `F.cross_entropy`, `loss_fn`): not a forward (`self.critic(obs)`)."""
    last = func.rpartition(".")[2].lower()
    return is_callable_name(func) or bool(set(last.split("_")) & _LOSS_WORDS) or "cross_entropy" in last \
        or "kl_div" in last


def is_criterion_name(name: str) -> bool:
    """A name that holds a criterion or loss function (`loss_fn`, `criterion`, `self.loss_func`): calling it computes
    a loss from its arguments."""
    last = name.rsplit(".", 1)[-1].lower()
    return is_callable_name(last) and any(w in last for w in ("loss", "criterion", "crit"))


def is_module_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return _MODULE_NAME.match(last) is not None and _VERB_PREFIX.match(last) is None


def is_loss_name(name: str) -> bool:
    return _LOSS_NAME.match(name.rsplit(".", 1)[-1].lower()) is not None


# Context managers and decorators, by their last name, and what they mean for the code under them.
CONTEXTS = {
    "no_grad": "no_grad",
    "inference_mode": "no_grad",
    "enable_grad": "enable_grad",
    "accumulate": "accumulate",
    "autocast": "autocast",
    "no_sync": "no_sync",
    "catch_warnings": "warnings_caught",  # `with warnings.catch_warnings():`: the code under it silences warnings
}


# Calls that switch autograd's grad mode, by their last name: the grad-mode contexts, and `set_grad_enabled(flag)`.
GRAD_MODE_SWITCHES = frozenset({k for k, v in CONTEXTS.items() if v in ("no_grad", "enable_grad")} | {"set_grad_enabled"})


def context_of(name: str) -> str | None:
    """What a `with` item or decorator, by its dotted name, means for the code under it."""
    if name.endswith("autograd.context"):
        return "dist_autograd"  # `with dist_autograd.context() as context_id:`: gradients live in the context
    return CONTEXTS.get(name.rsplit(".", 1)[-1])


# Builtins that compute on a value without running a forward (`out.sum()` is not a new graph).
NOT_A_FORWARD = frozenset({"sum", "float", "len", "abs", "max", "min", "list", "tuple"})


# Names of an accumulation step count: how many micro-batches make one optimizer update
# (`args.gradient_accumulation_steps`, `grad_acc`, `iters_to_accumulate`, `update_freq`, `update_every`).
ACCUMULATION_NAME = re.compile(r"accum|accumulation|grad_acc|update_(?:freq|every|interval)|iters_to_acc",
                               re.IGNORECASE)


# A line that only shows a value (a float prints the same number as a 0-dim tensor).
DISPLAY = re.compile(r"print\(|\bf[\"']|\.format\(|\blog|%|\.add_scalar\(|\bwandb\.")


# Words in a call that detaches or re-creates a recurrent state (`repackage_hidden(h)`, `init_hidden()`).
STATE_RESETS = ("detach", "repackage", "init_hidden", "init_state", "zeros", "zeros_like", "randn", "new_zeros")

# Optimizers whose update does not change when every gradient is multiplied by the same factor (they divide by a
# running gradient magnitude, or take its sign): an accumulation window summed instead of averaged changes nothing
# for them unless clipping or a coupled L2 weight decay sees the larger gradients.
SCALE_INVARIANT_OPTIMIZERS = frozenset({
    "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "SparseAdam", "Adafactor",
    "FusedAdam", "FusedLAMB", "FusedAdagrad", "LAMB", "Lamb", "Lion", "AdamW8bit", "Adam8bit", "PagedAdamW",
    "PagedAdamW8bit", "DeepSpeedCPUAdam", "Rprop", "AdaBelief", "AdamP", "Yogi", "Ranger", "Novograd", "Muon",
})
# Optimizers whose update is proportional to the gradient (SGD, with or without momentum): a summed window is an
# update k times too large.
SCALE_SENSITIVE_OPTIMIZERS = frozenset({"SGD", "ASGD", "SGDW", "SGDP", "FusedSGD"})
# The family a class of another library belongs to, read from its name's ending (`HybridAdam`, `CPUAdam`,
# `FusedAdam` are Adam; `FusedSGD` is SGD). A class that neither lists nor this names is an optimizer not known.
_INVARIANT_FAMILY = re.compile(r"(Adam|AdamW|Lamb|LAMB|Adagrad|Lion)$")
_SENSITIVE_FAMILY = re.compile(r"SGD$")


def scale_invariant(optimizer_class: str) -> bool | None:
    """Does the optimizer `optimizer_class` (its class name) make the same update from k times the gradient?
    True for the Adam family, False for SGD's, None for a class not known."""
    if optimizer_class in SCALE_INVARIANT_OPTIMIZERS or _INVARIANT_FAMILY.search(optimizer_class):
        return True
    if optimizer_class in SCALE_SENSITIVE_OPTIMIZERS or _SENSITIVE_FAMILY.search(optimizer_class):
        return False
    return None


# A learning rate divided by the batch (`lr=cfg.learning_rate / cfg.batch`): the convention of a loss summed over
# the samples of the batch (Darknet, Caffe), whose gradients are meant to add up across its micro-batches.
BATCH_NAME = re.compile(r"(^|[._])(batch(_?size)?|bs|total_batch\w*|\w*_batch(_size)?)$", re.IGNORECASE)
# Those of them whose weight decay is decoupled from the gradient (AdamW): a `weight_decay=` does not see its scale.
DECOUPLED_DECAY_OPTIMIZERS = frozenset({"AdamW", "AdamW8bit", "PagedAdamW", "PagedAdamW8bit", "LAMB", "Lamb",
                                        "FusedLAMB", "Lion", "Adafactor"})

# Base classes of a torch module, as written in a class statement (`class Net(nn.Module)`, Lightning's module).
MODULE_BASES = frozenset({"Module", "LightningModule", "Sequential", "ModuleList", "ModuleDict"})


# Calls that read the values they are given and back-propagate nothing: builtins, display, plots, the numerics of
# other libraries (by their conventional import names).
READING_CALLS = frozenset(
    """print len str repr format float int bool round sum min max abs sorted list tuple dict set enumerate zip
    isinstance any all reversed iter id type""".split()
)
DISPLAY_METHOD = re.compile(
    r"log|log_\w+|info|debug|warning|warn|error|add_scalars?|add_histogram|set_postfix(_str)?|set_description(_str)?"
    r"|write|plot|plot_\w+|semilog[xy]|loglog|scatter|imshow|errorbar|fill_between"  # (a figure's axes: `ax.plot`)
)
# Functions that write what they are given to a file or a string (pickled, not differentiated), named in full.
SERIALIZERS = frozenset({"torch.save", "pickle.dump", "pickle.dumps", "json.dump", "json.dumps"})
NUMERIC_MODULES = ("torch", "F", "nn", "np", "numpy", "math", "statistics", "plt", "pyplot", "matplotlib", "sns",
                   "seaborn")
# Modules whose functions compute plain numbers (NumPy arrays, floats) with no autograd graph, whatever they are given.
NUMBER_MODULES = frozenset({"np", "numpy", "math", "statistics"})
# Names that hold a run's options (`args.kd_weight`): what their attributes hold are numbers, never a graph.
OPTIONS_HOLDERS = frozenset({"args", "cfg", "config", "conf", "hparams"})
# Names that hold settings rather than count anything (`args.accum_steps`): never a divisor on their own.
SETTINGS_HOLDERS = frozenset({"self", "args", "config", "cfg", "opt", "hparams"})
# Rescaling the gradients by hand, after backward: methods of trainers and optimizers wrappers that multiply the
# gradients, and in-place arithmetic on `.grad`.
GRAD_RESCALING_METHODS = ("multiply_grads", "scale_grads")
GRAD_RESCALING_TEXT = re.compile(r"multiply_grads|scale_grads|\.grad(?:\.data)?\s*(?:\.\s*(?:mul_|div_)|[*/]=)")
# The functional namespace: its functions build no module state (`F.cross_entropy(out, y)`).
FUNCTIONAL_MODULES = ("F", "nn.functional", "torch.nn.functional")
# Calls that wrap a value in a new leaf tensor: with `requires_grad=True` the result has no graph behind it.
TENSOR_REWRAPPERS = ("torch.tensor", "torch.as_tensor", "Variable", "torch.autograd.Variable")
# Constructors that copy the values of a list into a new tensor (`torch.tensor(losses)`): no graph reaches it.
LIST_TO_TENSOR = ("torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.cuda.FloatTensor")
# Reductions that keep a value's graph (`loss.mean()`).
GRAPH_REDUCTIONS = ("mean", "sum")

# Other deep-learning frameworks, whose optimizers and tensors look like PyTorch's (`optimizer.step()`,
# `loss.backward()`) but follow their own rules (Paddle clears with `clear_grad()`): a file that imports one of them
# and nothing of PyTorch's is not PyTorch code (`prescan.other_framework`).
OTHER_FRAMEWORKS = frozenset(
    "paddle paddlenlp paddlex tensorflow keras tf_keras mindspore oneflow jittor mxnet megengine mlx".split())
# Packages whose import means PyTorch code (PyTorch itself and the trainers built on it).
TORCH_PACKAGES = frozenset("torch torchvision torchaudio torchtext lightning pytorch_lightning accelerate".split())

# Division as a call: `loss.div(k)`, `loss.div_(k)`, `torch.div(loss, k)`, `torch.true_divide(loss, k)`.
DIVIDING_METHODS = frozenset({"div", "div_", "divide", "divide_", "true_divide", "true_divide_"})

# Engines that run a function of the user's once per iteration and do nothing to gradients themselves: ignite's
# `Engine(process_function)` (and its subclasses) calls it with each batch, so that function is a whole iteration.
# By module and class name, as the file imports them.
ITERATION_ENGINES = frozenset({("ignite.engine", "Engine"), ("ignite.engine.engine", "Engine"),
                               ("ignite.engine", "DeterministicEngine"),
                               ("ignite.engine.deterministic", "DeterministicEngine")})

# Functions of other libraries that step the optimizer they are given first, by their full dotted name: torch_xla's
# `xm.optimizer_step(optimizer)` all-reduces the gradients across replicas, then calls `optimizer.step()`; it clears
# nothing. (`import torch_xla.core.xla_model as xm`.)
STEPPING_FUNCTIONS = frozenset({"torch_xla.core.xla_model.optimizer_step"})
STEPPING_LAST_NAMES = frozenset(f.rsplit(".", 1)[-1] for f in STEPPING_FUNCTIONS)
# torch.nn.utils' clipping functions (`clip_grad_norm`: the name before 0.4, still accepted for years)
CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})

# Containers that drop their oldest items past a bound given when built: the constructor's last name -> the keyword
# and position of that bound (`deque(maxlen=100)`, `deque([], 100)`); `None` as the bound leaves it unbounded.
BOUNDED_CONTAINERS = {"deque": ("maxlen", 1)}


# The key of an output dict's entry that holds a score, not a tensor of the graph (`output["metric"]`,
# `out["accuracy"]`, `logs["ntokens"]`): a model returning a dict computes such entries for reporting.
_METRIC_KEY_WORDS = frozenset({"metric", "metrics", "acc", "accuracy", "f1", "precision", "recall", "stats", "stat",
                               "bleu", "wer", "cer", "ntokens", "count", "counts", "correct"})


def is_metric_key(key: str) -> bool:
    return any(part in _METRIC_KEY_WORDS for part in re.split(r"[_\W]+", key.lower()))


# What reads only an index, an order or a truth value of its operands (`torch.eq(pred, y)`, `out.argmax(1)`): a
# tensor with no graph, however its operands were computed.
INDEX_FUNCTIONS = frozenset("""argmax argmin argsort eq ne gt ge lt le greater less equal isclose isnan isinf isfinite
    nonzero count_nonzero logical_and logical_or logical_not logical_xor bucketize searchsorted""".split())
# Reductions that give (values, indices): `torch.max(out, 1)[1]`, `out.topk(5).indices` are the indices.
VALUES_INDICES = frozenset("max min topk sort kthvalue mode median cummax cummin".split())

# The method an item store calls (`stats["loss"] = loss`): a collector whose `__setitem__` appends keeps each value.
SET_ITEM = "__setitem__"
