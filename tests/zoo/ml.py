"""Classic-ML zoo: scikit-learn models through skl2onnx, LightGBM and XGBoost through onnxmltools.

Every model is fitted on ~200 generated rows with fixed seeds (a second or two each) and run on
held-out rows, some with missing values where the model handles them."""
from __future__ import annotations

import importlib
from typing import Any, Dict, Optional

import numpy as np

from zoo.zoo import ZooModel

N_TRAIN, N_TEST, SEED = 200, 40, 0
ML_OPSET_DEFAULT = None       # the converters' own choice of opsets
ML_OPSET_3 = {"": 17, "ai.onnx.ml": 3}


def _version(module: str) -> str:
    try:
        return importlib.import_module(module).__version__
    except Exception:          # not installed: the record is skipped by `requires`
        return "?"


def _classification(n_classes: int = 2, features: int = 6, seed: int = SEED, labels=None):
    from sklearn.datasets import make_classification
    x, y = make_classification(n_samples=N_TRAIN + N_TEST, n_features=features, n_informative=4,
                               n_redundant=1, n_classes=n_classes, random_state=seed)
    x = x.astype(np.float32)
    if labels is not None:
        y = np.asarray(labels)[y]
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:]


def _regression(features: int = 5, seed: int = SEED):
    from sklearn.datasets import make_regression
    x, y = make_regression(n_samples=N_TRAIN + N_TEST, n_features=features, noise=0.5,
                           random_state=seed)
    x = x.astype(np.float32)
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:]


def _save(onx: Any, path: str) -> None:
    with open(path, "wb") as f:
        f.write(onx.SerializeToString())


def _skl(model: Any, x_test: np.ndarray, path: str, opset: Optional[Dict[str, int]] = None,
         options: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    from skl2onnx import to_onnx
    onx = to_onnx(model, x_test[:1], target_opset=opset, options=options)
    _save(onx, path)
    return {onx.graph.input[0].name: x_test}


class _IntMissingFlags:
    """skl2onnx 1.20 passes a Python bool as a HistGradientBoosting leaf's
    nodes_missing_value_tracks_true, which onnx 1.23's make_attribute refuses; while this is
    active its add_node gets an int instead (the value is unchanged)."""

    def __enter__(self) -> "_IntMissingFlags":
        from skl2onnx.common import tree_ensemble
        self.module, self.original = tree_ensemble, tree_ensemble.add_node

        def add_node(*args: Any, **kwargs: Any) -> Any:
            flag = kwargs.get("nodes_missing_value_tracks_true")
            if flag is not None:
                kwargs["nodes_missing_value_tracks_true"] = int(flag)
            return self.original(*args, **kwargs)
        tree_ensemble.add_node = add_node
        return self

    def __exit__(self, *exc: Any) -> None:
        self.module.add_node = self.original


def _sk(name: str, make, data, zipmap: bool = True, opset=ML_OPSET_DEFAULT, key: str = "1",
        classifier: bool = True, tol: float = 1e-4, double: bool = False) -> ZooModel:
    """A scikit-learn record: make() builds the estimator, data() gives (x, y, x_test); with
    `double` the model reads float64 (trees then carry v3's `*_as_tensor` attributes)."""
    def build(path: str) -> Dict[str, Any]:
        x, y, x_test = data()
        if double:
            x, x_test = x.astype(np.float64), x_test.astype(np.float64)
        use_opset = ML_OPSET_3 if double else opset
        model = make().fit(x, y)
        options = None if zipmap else {id(model): {"zipmap": False}}
        with _IntMissingFlags():
            return _skl(model, x_test, path, use_opset, options)
    tool = "skl2onnx %s, scikit-learn %s" % (_version("skl2onnx"), _version("sklearn"))
    return ZooModel(name=name, tool=tool, build=build, key=key + ("-f64-ml3" if double else ""),
                    compare="labels" if classifier else "float", rtol=tol,
                    atol=1e-5 if classifier else 1e-4, requires=("sklearn", "skl2onnx"))


def _logreg():
    from sklearn.linear_model import LogisticRegression
    return LogisticRegression(max_iter=500)


def _linear_svc():
    from sklearn.svm import LinearSVC
    return LinearSVC(random_state=SEED)


def _svc_proba():
    from sklearn.svm import SVC
    return SVC(kernel="rbf", probability=True, random_state=SEED)


def _svc_plain():
    from sklearn.svm import SVC
    return SVC(kernel="poly", degree=3)


def _svr():
    from sklearn.svm import SVR
    return SVR(kernel="rbf", C=10.0)


def _linreg():
    from sklearn.linear_model import LinearRegression
    return LinearRegression()


def _rf_classifier():
    from sklearn.ensemble import RandomForestClassifier
    return RandomForestClassifier(n_estimators=10, max_depth=6, random_state=SEED)


def _rf_regressor():
    from sklearn.ensemble import RandomForestRegressor
    return RandomForestRegressor(n_estimators=10, max_depth=6, random_state=SEED)


def _gb_classifier():
    from sklearn.ensemble import GradientBoostingClassifier
    return GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=SEED)


def _hgb_classifier():
    from sklearn.ensemble import HistGradientBoostingClassifier
    return HistGradientBoostingClassifier(max_iter=20, random_state=SEED)


def _hgb_regressor():
    from sklearn.ensemble import HistGradientBoostingRegressor
    return HistGradientBoostingRegressor(max_iter=20, random_state=SEED)


def _with_nans(data):
    """Data with ~10 % missing values in training and test rows."""
    def make():
        x, y, x_test = data()
        rng = np.random.RandomState(SEED + 1)
        for a in (x, x_test):
            a[rng.rand(*a.shape) < 0.1] = np.nan
        return x, y, x_test
    return make


_BIN = _classification
_MULTI = lambda: _classification(3)                       # noqa: E731
_STR3 = lambda: _classification(3, labels=["cat", "dog", "eel"])   # noqa: E731
_STR2 = lambda: _classification(2, labels=["no", "yes"])  # noqa: E731
_INT2 = lambda: _classification(2, labels=[3, 7])         # noqa: E731


def _column_transformer(path: str) -> Dict[str, Any]:
    """ColumnTransformer: numeric columns imputed and scaled, a string column one-hot encoded,
    then LogisticRegression; two inputs (float and string)."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from skl2onnx.sklapi import CastTransformer
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    rng = np.random.RandomState(SEED)
    n = N_TRAIN + N_TEST
    num = rng.randn(n, 3).astype(np.float32)
    cat = rng.choice(["red", "green", "blue", "grey"], size=(n, 1)).astype(object)
    y = ((num[:, 0] + (cat[:, 0] == "red") * 1.5 + 0.3 * rng.randn(n)) > 0.4).astype(np.int64)
    num[rng.rand(n, 3) < 0.1] = np.nan
    cat[N_TRAIN + 3, 0] = "purple"            # a category never seen in training
    x = np.concatenate([num.astype(object), cat], axis=1)
    numeric = Pipeline([("cast", CastTransformer(dtype=np.float32)),
                        ("impute", SimpleImputer(strategy="median")),
                        ("scale", StandardScaler())])
    pre = ColumnTransformer([("num", numeric, [0, 1, 2]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), [3])])
    model = Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=500))])
    model.fit(x[:N_TRAIN], y[:N_TRAIN])
    onx = to_onnx(model, initial_types=[("num", FloatTensorType([None, 3])),
                                        ("cat", StringTensorType([None, 1]))])
    _save(onx, path)
    return {"num": num[N_TRAIN:], "cat": cat[N_TRAIN:]}


def _dict_vectorizer(path: str) -> Dict[str, Any]:
    """DictVectorizer + LogisticRegression on one map {feature name: value} (onnxruntime runs
    DictVectorizer on a single map)."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    rng = np.random.RandomState(SEED)
    names = ["a", "b", "c", "d"]
    rows = [{k: float(rng.randn()) for k in names if rng.rand() < 0.8} for _ in range(N_TRAIN)]
    y = np.array([int(r.get("a", 0.0) + r.get("c", 0.0) > 0) for r in rows])
    model = Pipeline([("vec", DictVectorizer(sparse=False)),
                      ("clf", LogisticRegression(max_iter=500))]).fit(rows, y)
    onx = to_onnx(model, initial_types=[("X", DictionaryType(StringTensorType([1]),
                                                               FloatTensorType([1])))],
                  options={id(model.steps[-1][1]): {"zipmap": False}})
    _save(onx, path)
    return {"X": {"a": 0.7, "c": -0.2, "d": 1.5}}


def _lgbm(name: str, classifier: bool, n_classes: int = 2, nans: bool = False) -> ZooModel:
    def build(path: str) -> Dict[str, Any]:
        import lightgbm
        from onnxmltools import convert_lightgbm
        from onnxmltools.convert.common.data_types import FloatTensorType
        data = (lambda: _classification(n_classes)) if classifier else _regression
        x, y, x_test = (_with_nans(data) if nans else data)()
        cls = lightgbm.LGBMClassifier if classifier else lightgbm.LGBMRegressor
        model = cls(n_estimators=20, num_leaves=15, random_state=SEED, verbose=-1).fit(x, y)
        onx = convert_lightgbm(model, initial_types=[("X", FloatTensorType([None, x.shape[1]]))],
                               zipmap=False, target_opset=15)
        _save(onx, path)
        return {"X": x_test}
    tool = "onnxmltools %s, lightgbm %s" % (_version("onnxmltools"), _version("lightgbm"))
    return ZooModel(name=name, tool=tool, build=build,
                    compare="labels" if classifier else "float",
                    rtol=1e-4, atol=1e-5 if classifier else 1e-4,
                    requires=("lightgbm", "onnxmltools"))


def _xgb(name: str, classifier: bool, n_classes: int = 2, nans: bool = False) -> ZooModel:
    def build(path: str) -> Dict[str, Any]:
        import xgboost
        from onnxmltools import convert_xgboost
        from onnxmltools.convert.common.data_types import FloatTensorType
        data = (lambda: _classification(n_classes)) if classifier else _regression
        x, y, x_test = (_with_nans(data) if nans else data)()
        cls = xgboost.XGBClassifier if classifier else xgboost.XGBRegressor
        model = cls(n_estimators=20, max_depth=4, random_state=SEED, n_jobs=1).fit(x, y)
        onx = convert_xgboost(model, initial_types=[("X", FloatTensorType([None, x.shape[1]]))],
                              target_opset=15)
        _save(onx, path)
        return {"X": x_test}
    tool = "onnxmltools %s, xgboost %s" % (_version("onnxmltools"), _version("xgboost"))
    return ZooModel(name=name, tool=tool, build=build,
                    compare="labels" if classifier else "float",
                    rtol=1e-4, atol=1e-5 if classifier else 1e-4,
                    requires=("xgboost", "onnxmltools"))


def _custom(name: str, build, requires=("sklearn", "skl2onnx")) -> ZooModel:
    tool = "skl2onnx %s, scikit-learn %s" % (_version("skl2onnx"), _version("sklearn"))
    return ZooModel(name=name, tool=tool, build=build, compare="labels", requires=requires)


MODELS = [
    _sk("sk_logreg_binary_zipmap", _logreg, _BIN),
    _sk("sk_logreg_binary", _logreg, _BIN, zipmap=False),
    _sk("sk_logreg_multiclass_zipmap", _logreg, _MULTI),
    _sk("sk_logreg_multiclass", _logreg, _MULTI, zipmap=False),
    _sk("sk_logreg_string_labels_zipmap", _logreg, _STR3),
    _sk("sk_logreg_string_labels_binary", _logreg, _STR2, zipmap=False),
    _sk("sk_linear_svc_binary", _linear_svc, _BIN),
    _sk("sk_linear_svc_multiclass", _linear_svc, _MULTI),
    _sk("sk_svc_rbf_proba_binary", _svc_proba, _BIN, zipmap=False),
    _sk("sk_svc_rbf_proba_multiclass", _svc_proba, _STR3),
    _sk("sk_svc_poly_multiclass", _svc_plain, _MULTI, zipmap=False),
    _sk("sk_svr_rbf", _svr, _regression, classifier=False),
    _sk("sk_linear_regression", _linreg, _regression, classifier=False),
    _sk("sk_random_forest_classifier", _rf_classifier, _MULTI, zipmap=False),
    _sk("sk_random_forest_classifier_int_labels", _rf_classifier, _INT2, zipmap=False),
    _sk("sk_random_forest_classifier_strings_double", _rf_classifier, _STR3, double=True),
    _sk("sk_random_forest_regressor", _rf_regressor, _regression, classifier=False),
    _sk("sk_gradient_boosting_binary", _gb_classifier, _BIN, zipmap=False),
    _sk("sk_gradient_boosting_multiclass", _gb_classifier, _MULTI, zipmap=False),
    _sk("sk_hist_gradient_boosting_nan", _hgb_classifier, _with_nans(_MULTI), zipmap=False),
    _sk("sk_hist_gradient_boosting_regressor_nan", _hgb_regressor, _with_nans(_regression),
        classifier=False),
    _sk("sk_linear_regression_ml_opset3", _linreg, _regression, classifier=False,
        opset=ML_OPSET_3),
    _custom("sk_column_transformer_pipeline", _column_transformer),
    _custom("sk_dict_vectorizer_pipeline", _dict_vectorizer),
    _lgbm("lgbm_classifier_binary", True),
    _lgbm("lgbm_classifier_multiclass_nan", True, n_classes=3, nans=True),
    _lgbm("lgbm_regressor", False),
    _xgb("xgb_classifier_binary", True),
    _xgb("xgb_classifier_multiclass_nan", True, n_classes=3, nans=True),
    _xgb("xgb_regressor", False),
]
