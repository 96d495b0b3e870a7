from gpucompute.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ACTIVATION_GELU_ERF: Activation
ACTIVATION_GELU_TANH: Activation
ACTIVATION_NONE: Activation
ACTIVATION_RELU: Activation
ACTIVATION_SILU: Activation
ANALYSIS_FORM_AUTO: AnalysisForm
ANALYSIS_FORM_ENSEMBLE_SPACE: AnalysisForm
ANALYSIS_FORM_OBSERVATION_SPACE: AnalysisForm
ASSIMILATION_METHOD_ENKF: AssimilationMethod
ASSIMILATION_METHOD_ETKF: AssimilationMethod
ASSIMILATION_METHOD_LETKF: AssimilationMethod
DESCRIPTOR: _descriptor.FileDescriptor
FALSE_ALARM_METHOD_BALUEV: FalseAlarmMethod
FALSE_ALARM_METHOD_BOOTSTRAP: FalseAlarmMethod
FALSE_ALARM_METHOD_DAVIES: FalseAlarmMethod
FALSE_ALARM_METHOD_NAIVE: FalseAlarmMethod
LAYER_TENSOR_BETA: LayerTensor
LAYER_TENSOR_BIAS: LayerTensor
LAYER_TENSOR_GAMMA: LayerTensor
LAYER_TENSOR_WEIGHT: LayerTensor
LOCALIZATION_METRIC_EUCLIDEAN: LocalizationMetric
LOCALIZATION_METRIC_GREAT_CIRCLE: LocalizationMetric
LOCALIZATION_METRIC_PERIODIC: LocalizationMetric
LOCALIZATION_TAPER_GASPARI_COHN: LocalizationTaper
LOCALIZATION_TAPER_GAUSSIAN: LocalizationTaper
LOCALIZATION_TAPER_STEP: LocalizationTaper
NORMALIZATION_LOG: Normalization
NORMALIZATION_MODEL: Normalization
NORMALIZATION_PSD: Normalization
NORMALIZATION_STANDARD: Normalization
PERIODOGRAM_METHOD_AUTO: PeriodogramMethod
PERIODOGRAM_METHOD_DIRECT: PeriodogramMethod
PERIODOGRAM_METHOD_FAST: PeriodogramMethod
RELAXATION_NONE: Relaxation
RELAXATION_RTPP: Relaxation
RELAXATION_RTPS: Relaxation

class AssimilateLimits(_message.Message):
    __slots__ = ["max_batch_size", "max_covariance_obs", "max_letkf_candidates", "max_members", "max_problems_per_request", "max_queue_depth"]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_COVARIANCE_OBS_FIELD_NUMBER: _ClassVar[int]
    MAX_LETKF_CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    MAX_PROBLEMS_PER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    max_batch_size: int
    max_covariance_obs: int
    max_letkf_candidates: int
    max_members: int
    max_problems_per_request: int
    max_queue_depth: int
    def __init__(self, max_problems_per_request: _Optional[int] = ..., max_members: _Optional[int] = ..., max_covariance_obs: _Optional[int] = ..., max_batch_size: _Optional[int] = ..., max_queue_depth: _Optional[int] = ..., max_letkf_candidates: _Optional[int] = ...) -> None: ...

class AssimilateRequest(_message.Message):
    __slots__ = ["dtype", "output_placement", "problems"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    dtype: _tensor_pb2.DType
    output_placement: _tensor_pb2.OutputPlacement
    problems: _containers.RepeatedCompositeFieldContainer[AssimilationProblem]
    def __init__(self, problems: _Optional[_Iterable[_Union[AssimilationProblem, _Mapping]]] = ..., dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., output_placement: _Optional[_Union[_tensor_pb2.OutputPlacement, _Mapping]] = ...) -> None: ...

class AssimilateResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AssimilationResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AssimilationResult, _Mapping]]] = ...) -> None: ...

class AssimilationProblem(_message.Message):
    __slots__ = ["form", "hx", "inflation", "localization", "method", "obs_error_covariance", "obs_error_variance", "perturbations", "relaxation", "relaxation_factor", "seed", "x", "y"]
    FORM_FIELD_NUMBER: _ClassVar[int]
    HX_FIELD_NUMBER: _ClassVar[int]
    INFLATION_FIELD_NUMBER: _ClassVar[int]
    LOCALIZATION_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    OBS_ERROR_COVARIANCE_FIELD_NUMBER: _ClassVar[int]
    OBS_ERROR_VARIANCE_FIELD_NUMBER: _ClassVar[int]
    PERTURBATIONS_FIELD_NUMBER: _ClassVar[int]
    RELAXATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    RELAXATION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    form: AnalysisForm
    hx: _tensor_pb2.Tensor
    inflation: float
    localization: Localization
    method: AssimilationMethod
    obs_error_covariance: _tensor_pb2.Tensor
    obs_error_variance: _tensor_pb2.Tensor
    perturbations: _tensor_pb2.Tensor
    relaxation: Relaxation
    relaxation_factor: float
    seed: int
    x: _tensor_pb2.Tensor
    y: _tensor_pb2.Tensor
    def __init__(self, x: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., hx: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., y: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., obs_error_variance: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., obs_error_covariance: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., method: _Optional[_Union[AssimilationMethod, str]] = ..., perturbations: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., seed: _Optional[int] = ..., inflation: _Optional[float] = ..., relaxation: _Optional[_Union[Relaxation, str]] = ..., relaxation_factor: _Optional[float] = ..., form: _Optional[_Union[AnalysisForm, str]] = ..., localization: _Optional[_Union[Localization, _Mapping]] = ...) -> None: ...

class AssimilationResult(_message.Message):
    __slots__ = ["analysis", "analysis_spread", "form", "innovation_mean"]
    ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_SPREAD_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    INNOVATION_MEAN_FIELD_NUMBER: _ClassVar[int]
    analysis: _tensor_pb2.Tensor
    analysis_spread: float
    form: AnalysisForm
    innovation_mean: _tensor_pb2.Tensor
    def __init__(self, analysis: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., innovation_mean: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., analysis_spread: _Optional[float] = ..., form: _Optional[_Union[AnalysisForm, str]] = ...) -> None: ...

class AutoGrid(_message.Message):
    __slots__ = ["maximum_frequency", "minimum_frequency", "nyquist_factor", "samples_per_peak"]
    MAXIMUM_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    NYQUIST_FACTOR_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_PEAK_FIELD_NUMBER: _ClassVar[int]
    maximum_frequency: float
    minimum_frequency: float
    nyquist_factor: float
    samples_per_peak: float
    def __init__(self, samples_per_peak: _Optional[float] = ..., nyquist_factor: _Optional[float] = ..., minimum_frequency: _Optional[float] = ..., maximum_frequency: _Optional[float] = ...) -> None: ...

class BatchingStats(_message.Message):
    __slots__ = ["batches", "expired_before_dispatch", "largest_batch", "queued", "rejected_queue_full", "requests"]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_BEFORE_DISPATCH_FIELD_NUMBER: _ClassVar[int]
    LARGEST_BATCH_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_QUEUE_FULL_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    batches: int
    expired_before_dispatch: int
    largest_batch: int
    queued: int
    rejected_queue_full: int
    requests: int
    def __init__(self, requests: _Optional[int] = ..., batches: _Optional[int] = ..., largest_batch: _Optional[int] = ..., rejected_queue_full: _Optional[int] = ..., expired_before_dispatch: _Optional[int] = ..., queued: _Optional[int] = ...) -> None: ...

class CreateTensorRequest(_message.Message):
    __slots__ = ["dtype", "idle_expiry_ms", "shape"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    IDLE_EXPIRY_MS_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    dtype: _tensor_pb2.DType
    idle_expiry_ms: int
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., idle_expiry_ms: _Optional[int] = ...) -> None: ...

class DeleteTensorRequest(_message.Message):
    __slots__ = ["handle"]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: str
    def __init__(self, handle: _Optional[str] = ...) -> None: ...

class DeleteTensorResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DenseLimits(_message.Message):
    __slots__ = ["max_batch_rows", "max_batch_size", "max_layers", "max_model_bytes", "max_models", "max_rows_per_request"]
    MAX_BATCH_ROWS_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_LAYERS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODELS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_PER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    max_batch_rows: int
    max_batch_size: int
    max_layers: int
    max_model_bytes: int
    max_models: int
    max_rows_per_request: int
    def __init__(self, max_model_bytes: _Optional[int] = ..., max_models: _Optional[int] = ..., max_layers: _Optional[int] = ..., max_rows_per_request: _Optional[int] = ..., max_batch_rows: _Optional[int] = ..., max_batch_size: _Optional[int] = ...) -> None: ...

class DenseRequest(_message.Message):
    __slots__ = ["input", "model", "output_placement"]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    input: _tensor_pb2.Tensor
    model: str
    output_placement: _tensor_pb2.OutputPlacement
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., output_placement: _Optional[_Union[_tensor_pb2.OutputPlacement, _Mapping]] = ...) -> None: ...

class DenseResponse(_message.Message):
    __slots__ = ["output"]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    output: _tensor_pb2.Tensor
    def __init__(self, output: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ...) -> None: ...

class DeviceInfo(_message.Message):
    __slots__ = ["compute_capability_major", "compute_capability_minor", "health_message", "healthy", "index", "multiprocessors", "name", "streams", "total_memory_bytes"]
    COMPUTE_CAPABILITY_MAJOR_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CAPABILITY_MINOR_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    HEALTH_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MULTIPROCESSORS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    compute_capability_major: int
    compute_capability_minor: int
    health_message: str
    healthy: bool
    index: int
    multiprocessors: int
    name: str
    streams: int
    total_memory_bytes: int
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., compute_capability_major: _Optional[int] = ..., compute_capability_minor: _Optional[int] = ..., total_memory_bytes: _Optional[int] = ..., multiprocessors: _Optional[int] = ..., streams: _Optional[int] = ..., healthy: bool = ..., health_message: _Optional[str] = ...) -> None: ...

class EchoRequest(_message.Message):
    __slots__ = ["discard", "output_placement", "tensor"]
    DISCARD_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    discard: bool
    output_placement: _tensor_pb2.OutputPlacement
    tensor: _tensor_pb2.Tensor
    def __init__(self, tensor: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., discard: bool = ..., output_placement: _Optional[_Union[_tensor_pb2.OutputPlacement, _Mapping]] = ...) -> None: ...

class EchoResponse(_message.Message):
    __slots__ = ["tensor"]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    tensor: _tensor_pb2.Tensor
    def __init__(self, tensor: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ...) -> None: ...

class FalseAlarmResult(_message.Message):
    __slots__ = ["levels", "peak_probability", "probabilities"]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    PEAK_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    levels: _containers.RepeatedScalarFieldContainer[float]
    peak_probability: float
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, peak_probability: _Optional[float] = ..., probabilities: _Optional[_Iterable[float]] = ..., levels: _Optional[_Iterable[float]] = ...) -> None: ...

class FalseAlarmSpec(_message.Message):
    __slots__ = ["method", "n_bootstraps", "powers", "probabilities", "seed"]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    N_BOOTSTRAPS_FIELD_NUMBER: _ClassVar[int]
    POWERS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    method: FalseAlarmMethod
    n_bootstraps: int
    powers: _containers.RepeatedScalarFieldContainer[float]
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    seed: int
    def __init__(self, method: _Optional[_Union[FalseAlarmMethod, str]] = ..., probabilities: _Optional[_Iterable[float]] = ..., powers: _Optional[_Iterable[float]] = ..., n_bootstraps: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class FrequencyGrid(_message.Message):
    __slots__ = ["auto", "explicit_frequencies", "uniform"]
    AUTO_FIELD_NUMBER: _ClassVar[int]
    EXPLICIT_FREQUENCIES_FIELD_NUMBER: _ClassVar[int]
    UNIFORM_FIELD_NUMBER: _ClassVar[int]
    auto: AutoGrid
    explicit_frequencies: _tensor_pb2.Tensor
    uniform: UniformGrid
    def __init__(self, explicit_frequencies: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., uniform: _Optional[_Union[UniformGrid, _Mapping]] = ..., auto: _Optional[_Union[AutoGrid, _Mapping]] = ...) -> None: ...

class GetTensorRequest(_message.Message):
    __slots__ = ["chunk_bytes", "handle", "length", "offset"]
    CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    chunk_bytes: int
    handle: str
    length: int
    offset: int
    def __init__(self, handle: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., chunk_bytes: _Optional[int] = ...) -> None: ...

class JobTiming(_message.Message):
    __slots__ = ["batch_requests", "compute_us", "queue_us", "total_us"]
    BATCH_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_US_FIELD_NUMBER: _ClassVar[int]
    QUEUE_US_FIELD_NUMBER: _ClassVar[int]
    TOTAL_US_FIELD_NUMBER: _ClassVar[int]
    batch_requests: int
    compute_us: int
    queue_us: int
    total_us: int
    def __init__(self, queue_us: _Optional[int] = ..., compute_us: _Optional[int] = ..., total_us: _Optional[int] = ..., batch_requests: _Optional[int] = ...) -> None: ...

class KernelCacheInfo(_message.Message):
    __slots__ = ["compile_ms_total", "directory", "disk_hits", "entries", "hits", "kernels", "misses"]
    COMPILE_MS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    DISK_HITS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    compile_ms_total: float
    directory: str
    disk_hits: int
    entries: int
    hits: int
    kernels: _containers.RepeatedScalarFieldContainer[str]
    misses: int
    def __init__(self, entries: _Optional[int] = ..., hits: _Optional[int] = ..., misses: _Optional[int] = ..., disk_hits: _Optional[int] = ..., compile_ms_total: _Optional[float] = ..., kernels: _Optional[_Iterable[str]] = ..., directory: _Optional[str] = ...) -> None: ...

class LayerHeader(_message.Message):
    __slots__ = ["activation", "bias", "layernorm", "weight"]
    ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    BIAS_FIELD_NUMBER: _ClassVar[int]
    LAYERNORM_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    activation: Activation
    bias: TensorHeader
    layernorm: LayerNormHeader
    weight: TensorHeader
    def __init__(self, weight: _Optional[_Union[TensorHeader, _Mapping]] = ..., bias: _Optional[_Union[TensorHeader, _Mapping]] = ..., layernorm: _Optional[_Union[LayerNormHeader, _Mapping]] = ..., activation: _Optional[_Union[Activation, str]] = ...) -> None: ...

class LayerInfo(_message.Message):
    __slots__ = ["activation", "eps", "in_features", "layernorm", "out_features"]
    ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    IN_FEATURES_FIELD_NUMBER: _ClassVar[int]
    LAYERNORM_FIELD_NUMBER: _ClassVar[int]
    OUT_FEATURES_FIELD_NUMBER: _ClassVar[int]
    activation: Activation
    eps: float
    in_features: int
    layernorm: bool
    out_features: int
    def __init__(self, in_features: _Optional[int] = ..., out_features: _Optional[int] = ..., layernorm: bool = ..., eps: _Optional[float] = ..., activation: _Optional[_Union[Activation, str]] = ...) -> None: ...

class LayerNormHeader(_message.Message):
    __slots__ = ["beta", "eps", "gamma"]
    BETA_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    beta: TensorHeader
    eps: float
    gamma: TensorHeader
    def __init__(self, eps: _Optional[float] = ..., gamma: _Optional[_Union[TensorHeader, _Mapping]] = ..., beta: _Optional[_Union[TensorHeader, _Mapping]] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["max_batch_size", "max_bootstrap_samples", "max_frequencies_per_series", "max_pairs_per_request", "max_queue_delay_us", "max_queue_depth", "max_request_bytes", "max_samples_per_series", "max_series_per_request"]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_BOOTSTRAP_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    MAX_FREQUENCIES_PER_SERIES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAIRS_PER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_DELAY_US_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_SAMPLES_PER_SERIES_FIELD_NUMBER: _ClassVar[int]
    MAX_SERIES_PER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    max_batch_size: int
    max_bootstrap_samples: int
    max_frequencies_per_series: int
    max_pairs_per_request: int
    max_queue_delay_us: int
    max_queue_depth: int
    max_request_bytes: int
    max_samples_per_series: int
    max_series_per_request: int
    def __init__(self, max_request_bytes: _Optional[int] = ..., max_series_per_request: _Optional[int] = ..., max_samples_per_series: _Optional[int] = ..., max_frequencies_per_series: _Optional[int] = ..., max_pairs_per_request: _Optional[int] = ..., max_batch_size: _Optional[int] = ..., max_queue_delay_us: _Optional[int] = ..., max_queue_depth: _Optional[int] = ..., max_bootstrap_samples: _Optional[int] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ["models"]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...

class ListTensorsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListTensorsResponse(_message.Message):
    __slots__ = ["bytes", "tensors"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    tensors: _containers.RepeatedCompositeFieldContainer[TensorInfo]
    def __init__(self, tensors: _Optional[_Iterable[_Union[TensorInfo, _Mapping]]] = ..., bytes: _Optional[int] = ...) -> None: ...

class LoadModelChunk(_message.Message):
    __slots__ = ["chunk", "header"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    chunk: TensorChunk
    header: ModelHeader
    def __init__(self, header: _Optional[_Union[ModelHeader, _Mapping]] = ..., chunk: _Optional[_Union[TensorChunk, _Mapping]] = ...) -> None: ...

class Localization(_message.Message):
    __slots__ = ["domain", "earth_radius", "metric", "obs_coords", "radius", "state_coords", "taper"]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    EARTH_RADIUS_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    OBS_COORDS_FIELD_NUMBER: _ClassVar[int]
    RADIUS_FIELD_NUMBER: _ClassVar[int]
    STATE_COORDS_FIELD_NUMBER: _ClassVar[int]
    TAPER_FIELD_NUMBER: _ClassVar[int]
    domain: _containers.RepeatedScalarFieldContainer[float]
    earth_radius: float
    metric: LocalizationMetric
    obs_coords: _tensor_pb2.Tensor
    radius: float
    state_coords: _tensor_pb2.Tensor
    taper: LocalizationTaper
    def __init__(self, state_coords: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., obs_coords: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., metric: _Optional[_Union[LocalizationMetric, str]] = ..., domain: _Optional[_Iterable[float]] = ..., earth_radius: _Optional[float] = ..., radius: _Optional[float] = ..., taper: _Optional[_Union[LocalizationTaper, str]] = ...) -> None: ...

class ModelHeader(_message.Message):
    __slots__ = ["allow_tf32", "dtype", "layers", "name"]
    ALLOW_TF32_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    allow_tf32: bool
    dtype: _tensor_pb2.DType
    layers: _containers.RepeatedCompositeFieldContainer[LayerHeader]
    name: str
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., allow_tf32: bool = ..., layers: _Optional[_Iterable[_Union[LayerHeader, _Mapping]]] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ["allow_tf32", "device_bytes", "devices", "dtype", "layers", "load_ms", "name"]
    ALLOW_TF32_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    LAYERS_FIELD_NUMBER: _ClassVar[int]
    LOAD_MS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    allow_tf32: bool
    device_bytes: int
    devices: _containers.RepeatedScalarFieldContainer[int]
    dtype: _tensor_pb2.DType
    layers: _containers.RepeatedCompositeFieldContainer[LayerInfo]
    load_ms: float
    name: str
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., allow_tf32: bool = ..., layers: _Optional[_Iterable[_Union[LayerInfo, _Mapping]]] = ..., device_bytes: _Optional[int] = ..., load_ms: _Optional[float] = ..., devices: _Optional[_Iterable[int]] = ...) -> None: ...

class ModelResult(_message.Message):
    __slots__ = ["frequency", "offset", "parameters", "y"]
    FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    frequency: float
    offset: float
    parameters: _containers.RepeatedScalarFieldContainer[float]
    y: _tensor_pb2.Tensor
    def __init__(self, frequency: _Optional[float] = ..., parameters: _Optional[_Iterable[float]] = ..., offset: _Optional[float] = ..., y: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ...) -> None: ...

class ModelSpec(_message.Message):
    __slots__ = ["frequency", "t"]
    FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    T_FIELD_NUMBER: _ClassVar[int]
    frequency: float
    t: _tensor_pb2.Tensor
    def __init__(self, frequency: _Optional[float] = ..., t: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ...) -> None: ...

class PackedSeries(_message.Message):
    __slots__ = ["dy", "lengths", "t", "y"]
    DY_FIELD_NUMBER: _ClassVar[int]
    LENGTHS_FIELD_NUMBER: _ClassVar[int]
    T_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    dy: _tensor_pb2.Tensor
    lengths: _containers.RepeatedScalarFieldContainer[int]
    t: _tensor_pb2.Tensor
    y: _tensor_pb2.Tensor
    def __init__(self, t: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., y: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., dy: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., lengths: _Optional[_Iterable[int]] = ...) -> None: ...

class PeriodogramColumns(_message.Message):
    __slots__ = ["false_alarm_levels", "false_alarm_peak_probability", "false_alarm_probabilities", "grid", "method", "peak_frequency", "peak_index", "peak_power", "peaks_false_alarm_probability", "peaks_frequency", "peaks_index", "peaks_power"]
    FALSE_ALARM_LEVELS_FIELD_NUMBER: _ClassVar[int]
    FALSE_ALARM_PEAK_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    FALSE_ALARM_PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PEAKS_FALSE_ALARM_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    PEAKS_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    PEAKS_INDEX_FIELD_NUMBER: _ClassVar[int]
    PEAKS_POWER_FIELD_NUMBER: _ClassVar[int]
    PEAK_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    PEAK_INDEX_FIELD_NUMBER: _ClassVar[int]
    PEAK_POWER_FIELD_NUMBER: _ClassVar[int]
    false_alarm_levels: _tensor_pb2.Tensor
    false_alarm_peak_probability: _tensor_pb2.Tensor
    false_alarm_probabilities: _tensor_pb2.Tensor
    grid: _tensor_pb2.Tensor
    method: _tensor_pb2.Tensor
    peak_frequency: _tensor_pb2.Tensor
    peak_index: _tensor_pb2.Tensor
    peak_power: _tensor_pb2.Tensor
    peaks_false_alarm_probability: _tensor_pb2.Tensor
    peaks_frequency: _tensor_pb2.Tensor
    peaks_index: _tensor_pb2.Tensor
    peaks_power: _tensor_pb2.Tensor
    def __init__(self, peak_frequency: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., peak_power: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., peak_index: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., method: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., grid: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., peaks_frequency: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., peaks_power: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., peaks_index: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., peaks_false_alarm_probability: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., false_alarm_peak_probability: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., false_alarm_probabilities: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., false_alarm_levels: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ...) -> None: ...

class PeriodogramPeak(_message.Message):
    __slots__ = ["false_alarm_probability", "frequency", "index", "power"]
    FALSE_ALARM_PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    POWER_FIELD_NUMBER: _ClassVar[int]
    false_alarm_probability: float
    frequency: float
    index: int
    power: float
    def __init__(self, frequency: _Optional[float] = ..., power: _Optional[float] = ..., index: _Optional[int] = ..., false_alarm_probability: _Optional[float] = ...) -> None: ...

class PeriodogramRequest(_message.Message):
    __slots__ = ["center_data", "dtype", "false_alarm", "fit_mean", "frequency", "method", "model_parameters", "normalization", "nterms", "output_placement", "packed_series", "result_columns", "series", "top_k"]
    CENTER_DATA_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    FALSE_ALARM_FIELD_NUMBER: _ClassVar[int]
    FIT_MEAN_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    MODEL_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    NORMALIZATION_FIELD_NUMBER: _ClassVar[int]
    NTERMS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    PACKED_SERIES_FIELD_NUMBER: _ClassVar[int]
    RESULT_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    center_data: bool
    dtype: _tensor_pb2.DType
    false_alarm: FalseAlarmSpec
    fit_mean: bool
    frequency: FrequencyGrid
    method: PeriodogramMethod
    model_parameters: bool
    normalization: Normalization
    nterms: int
    output_placement: _tensor_pb2.OutputPlacement
    packed_series: PackedSeries
    result_columns: bool
    series: _containers.RepeatedCompositeFieldContainer[Series]
    top_k: int
    def __init__(self, series: _Optional[_Iterable[_Union[Series, _Mapping]]] = ..., frequency: _Optional[_Union[FrequencyGrid, _Mapping]] = ..., fit_mean: bool = ..., center_data: bool = ..., normalization: _Optional[_Union[Normalization, str]] = ..., dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., output_placement: _Optional[_Union[_tensor_pb2.OutputPlacement, _Mapping]] = ..., method: _Optional[_Union[PeriodogramMethod, str]] = ..., nterms: _Optional[int] = ..., top_k: _Optional[int] = ..., false_alarm: _Optional[_Union[FalseAlarmSpec, _Mapping]] = ..., model_parameters: bool = ..., packed_series: _Optional[_Union[PackedSeries, _Mapping]] = ..., result_columns: bool = ...) -> None: ...

class PeriodogramResponse(_message.Message):
    __slots__ = ["columns", "results"]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    columns: PeriodogramColumns
    results: _containers.RepeatedCompositeFieldContainer[SeriesResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SeriesResult, _Mapping]]] = ..., columns: _Optional[_Union[PeriodogramColumns, _Mapping]] = ...) -> None: ...

class PutTensorChunk(_message.Message):
    __slots__ = ["data", "header", "offset"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: PutTensorHeader
    offset: int
    def __init__(self, header: _Optional[_Union[PutTensorHeader, _Mapping]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PutTensorHeader(_message.Message):
    __slots__ = ["dtype", "handle", "shape"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    dtype: _tensor_pb2.DType
    handle: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., handle: _Optional[str] = ...) -> None: ...

class RegisterSharedMemoryRequest(_message.Message):
    __slots__ = ["byte_size", "key", "name", "offset", "proof"]
    BYTE_SIZE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    byte_size: int
    key: str
    name: str
    offset: int
    proof: bytes
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., offset: _Optional[int] = ..., byte_size: _Optional[int] = ..., proof: _Optional[bytes] = ...) -> None: ...

class RegisterSharedMemoryResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Series(_message.Message):
    __slots__ = ["dy", "frequency", "model", "t", "y"]
    DY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    T_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    dy: _tensor_pb2.Tensor
    frequency: FrequencyGrid
    model: ModelSpec
    t: _tensor_pb2.Tensor
    y: _tensor_pb2.Tensor
    def __init__(self, t: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., y: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., dy: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., frequency: _Optional[_Union[FrequencyGrid, _Mapping]] = ..., model: _Optional[_Union[ModelSpec, _Mapping]] = ...) -> None: ...

class SeriesResult(_message.Message):
    __slots__ = ["false_alarm", "grid", "method", "model", "peak_frequency", "peak_index", "peak_power", "peaks", "power"]
    FALSE_ALARM_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PEAKS_FIELD_NUMBER: _ClassVar[int]
    PEAK_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    PEAK_INDEX_FIELD_NUMBER: _ClassVar[int]
    PEAK_POWER_FIELD_NUMBER: _ClassVar[int]
    POWER_FIELD_NUMBER: _ClassVar[int]
    false_alarm: FalseAlarmResult
    grid: UniformGrid
    method: PeriodogramMethod
    model: ModelResult
    peak_frequency: float
    peak_index: int
    peak_power: float
    peaks: _containers.RepeatedCompositeFieldContainer[PeriodogramPeak]
    power: _tensor_pb2.Tensor
    def __init__(self, power: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ..., grid: _Optional[_Union[UniformGrid, _Mapping]] = ..., peak_frequency: _Optional[float] = ..., peak_power: _Optional[float] = ..., peak_index: _Optional[int] = ..., peaks: _Optional[_Iterable[_Union[PeriodogramPeak, _Mapping]]] = ..., false_alarm: _Optional[_Union[FalseAlarmResult, _Mapping]] = ..., model: _Optional[_Union[ModelResult, _Mapping]] = ..., method: _Optional[_Union[PeriodogramMethod, str]] = ...) -> None: ...

class ServerInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ServerInfoResponse(_message.Message):
    __slots__ = ["assimilate_batching", "assimilate_limits", "backend", "dense_batching", "dense_limits", "devices", "kernel_cache", "limits", "nvrtc_version", "periodogram_batching", "shared_memory_enabled", "stream_limits", "tensor_limits", "version", "workers"]
    ASSIMILATE_BATCHING_FIELD_NUMBER: _ClassVar[int]
    ASSIMILATE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    DENSE_BATCHING_FIELD_NUMBER: _ClassVar[int]
    DENSE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    KERNEL_CACHE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NVRTC_VERSION_FIELD_NUMBER: _ClassVar[int]
    PERIODOGRAM_BATCHING_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_ENABLED_FIELD_NUMBER: _ClassVar[int]
    STREAM_LIMITS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_LIMITS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    assimilate_batching: BatchingStats
    assimilate_limits: AssimilateLimits
    backend: str
    dense_batching: BatchingStats
    dense_limits: DenseLimits
    devices: _containers.RepeatedCompositeFieldContainer[DeviceInfo]
    kernel_cache: KernelCacheInfo
    limits: Limits
    nvrtc_version: str
    periodogram_batching: BatchingStats
    shared_memory_enabled: bool
    stream_limits: StreamLimits
    tensor_limits: TensorLimits
    version: str
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, version: _Optional[str] = ..., backend: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[DeviceInfo, _Mapping]]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., kernel_cache: _Optional[_Union[KernelCacheInfo, _Mapping]] = ..., periodogram_batching: _Optional[_Union[BatchingStats, _Mapping]] = ..., nvrtc_version: _Optional[str] = ..., dense_batching: _Optional[_Union[BatchingStats, _Mapping]] = ..., dense_limits: _Optional[_Union[DenseLimits, _Mapping]] = ..., assimilate_batching: _Optional[_Union[BatchingStats, _Mapping]] = ..., assimilate_limits: _Optional[_Union[AssimilateLimits, _Mapping]] = ..., stream_limits: _Optional[_Union[StreamLimits, _Mapping]] = ..., tensor_limits: _Optional[_Union[TensorLimits, _Mapping]] = ..., shared_memory_enabled: bool = ..., workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class SharedMemoryProofRequest(_message.Message):
    __slots__ = ["key", "offset"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    key: str
    offset: int
    def __init__(self, key: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class SharedMemoryProofResponse(_message.Message):
    __slots__ = ["proof"]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    proof: bytes
    def __init__(self, proof: _Optional[bytes] = ...) -> None: ...

class StreamLimits(_message.Message):
    __slots__ = ["max_jobs_in_flight"]
    MAX_JOBS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    max_jobs_in_flight: int
    def __init__(self, max_jobs_in_flight: _Optional[int] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ["assimilate", "dense", "echo", "id", "periodogram", "timeout_us"]
    ASSIMILATE_FIELD_NUMBER: _ClassVar[int]
    DENSE_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PERIODOGRAM_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_US_FIELD_NUMBER: _ClassVar[int]
    assimilate: AssimilateRequest
    dense: DenseRequest
    echo: EchoRequest
    id: str
    periodogram: PeriodogramRequest
    timeout_us: int
    def __init__(self, id: _Optional[str] = ..., periodogram: _Optional[_Union[PeriodogramRequest, _Mapping]] = ..., dense: _Optional[_Union[DenseRequest, _Mapping]] = ..., assimilate: _Optional[_Union[AssimilateRequest, _Mapping]] = ..., echo: _Optional[_Union[EchoRequest, _Mapping]] = ..., timeout_us: _Optional[int] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ["assimilate", "code", "dense", "echo", "id", "message", "periodogram", "timing"]
    ASSIMILATE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DENSE_FIELD_NUMBER: _ClassVar[int]
    ECHO_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PERIODOGRAM_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    assimilate: AssimilateResponse
    code: int
    dense: DenseResponse
    echo: EchoResponse
    id: str
    message: str
    periodogram: PeriodogramResponse
    timing: JobTiming
    def __init__(self, id: _Optional[str] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., periodogram: _Optional[_Union[PeriodogramResponse, _Mapping]] = ..., dense: _Optional[_Union[DenseResponse, _Mapping]] = ..., assimilate: _Optional[_Union[AssimilateResponse, _Mapping]] = ..., echo: _Optional[_Union[EchoResponse, _Mapping]] = ..., timing: _Optional[_Union[JobTiming, _Mapping]] = ...) -> None: ...

class TensorChunk(_message.Message):
    __slots__ = ["data", "layer", "offset", "tensor"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LAYER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    layer: int
    offset: int
    tensor: LayerTensor
    def __init__(self, layer: _Optional[int] = ..., tensor: _Optional[_Union[LayerTensor, str]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class TensorData(_message.Message):
    __slots__ = ["data", "info", "offset"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    info: TensorInfo
    offset: int
    def __init__(self, offset: _Optional[int] = ..., data: _Optional[bytes] = ..., info: _Optional[_Union[TensorInfo, _Mapping]] = ...) -> None: ...

class TensorHeader(_message.Message):
    __slots__ = ["dtype", "shape"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    dtype: _tensor_pb2.DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class TensorInfo(_message.Message):
    __slots__ = ["bytes", "complete", "dtype", "handle", "idle_ms", "owner", "shape"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    IDLE_MS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    complete: bool
    dtype: _tensor_pb2.DType
    handle: str
    idle_ms: int
    owner: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, handle: _Optional[str] = ..., dtype: _Optional[_Union[_tensor_pb2.DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., bytes: _Optional[int] = ..., complete: bool = ..., owner: _Optional[str] = ..., idle_ms: _Optional[int] = ...) -> None: ...

class TensorLimits(_message.Message):
    __slots__ = ["idle_expiry_ms", "max_bytes_per_client", "max_tensors_per_client"]
    IDLE_EXPIRY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_PER_CLIENT_FIELD_NUMBER: _ClassVar[int]
    MAX_TENSORS_PER_CLIENT_FIELD_NUMBER: _ClassVar[int]
    idle_expiry_ms: int
    max_bytes_per_client: int
    max_tensors_per_client: int
    def __init__(self, max_bytes_per_client: _Optional[int] = ..., max_tensors_per_client: _Optional[int] = ..., idle_expiry_ms: _Optional[int] = ...) -> None: ...

class UniformGrid(_message.Message):
    __slots__ = ["df", "f0", "n"]
    DF_FIELD_NUMBER: _ClassVar[int]
    F0_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    df: float
    f0: float
    n: int
    def __init__(self, f0: _Optional[float] = ..., df: _Optional[float] = ..., n: _Optional[int] = ...) -> None: ...

class UnloadModelRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UnloadModelResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class UnregisterSharedMemoryRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UnregisterSharedMemoryResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ["calls_in_flight", "device", "index", "message", "pid", "restarts", "state"]
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    calls_in_flight: int
    device: str
    index: int
    message: str
    pid: int
    restarts: int
    state: str
    def __init__(self, index: _Optional[int] = ..., pid: _Optional[int] = ..., state: _Optional[str] = ..., restarts: _Optional[int] = ..., device: _Optional[str] = ..., message: _Optional[str] = ..., calls_in_flight: _Optional[int] = ...) -> None: ...

class Normalization(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PeriodogramMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FalseAlarmMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Activation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LayerTensor(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AssimilationMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LocalizationMetric(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LocalizationTaper(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Relaxation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AnalysisForm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
