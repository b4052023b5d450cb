"""The seed example: a TF-style model_fn on the bundled iris data (train, evaluate, predict)."""

import pandas as pd
import torch

import estimator_engine as ee

df = pd.read_csv("sample_data/iris.csv")
species = sorted(df["species"].unique())
x = df.drop(columns="species").astype("float32")
y = df["species"].map(species.index)
train_x, eval_x = x.iloc[::2], x.iloc[1::2]
train_y, eval_y = y.iloc[::2], y.iloc[1::2]


def my_model_fn(features, labels, mode, params):
    net = ee.get_module("mlp", lambda: torch.nn.Sequential(
        torch.nn.Linear(len(features), params["hidden_units"]), torch.nn.ReLU(),
        torch.nn.Linear(params["hidden_units"], params["n_classes"])))
    inputs = torch.cat([features[name].reshape(-1, 1) for name in sorted(features)], dim=1)
    logits = net(inputs)
    classes = logits.argmax(dim=1)
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={
            "classes": classes, "probabilities": logits.softmax(dim=1)})
    loss = torch.nn.functional.cross_entropy(logits, labels)
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": ee.metrics.accuracy(labels=labels, predictions=classes)})
    optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=params["learning_rate"],
                                                                  fused=True))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


estimator = ee.Estimator(my_model_fn, params={"hidden_units": 32, "n_classes": 3, "learning_rate": 0.01},
                         config=ee.RunConfig(tf_random_seed=42))
train_input_fn = ee.inputs.pandas_input_fn(train_x, train_y, batch_size=32, num_epochs=None, shuffle=True)
eval_input_fn = ee.inputs.pandas_input_fn(eval_x, eval_y, batch_size=32, shuffle=False)
predict_input_fn = ee.inputs.pandas_input_fn(eval_x.head(5), shuffle=False)

estimator.train(input_fn=train_input_fn, steps=1000)
print(estimator.evaluate(input_fn=eval_input_fn))
for prediction in estimator.predict(input_fn=predict_input_fn):
    print(species[prediction["classes"]], prediction["probabilities"].round(3))
