/* A tiny application of the installed library (test/install): construct a
 * model, add two layers, compile, destroy. Built with pkg-config and with
 * CMake's find_package(nntrainer CONFIG), against an installed prefix
 * (test_install.sh) and against the installed .deb packages
 * (scripts/check-debs.sh). */
#include <stdio.h>
#include <nntrainer.h>

static int fail(const char *what, int rc) {
  const char *msg = ml_error();
  fprintf(stderr, "%s: %d %s\n", what, rc, msg ? msg : "");
  return 1;
}

int main(void) {
  ml_train_model_h model;
  ml_train_layer_h input, fc;
  int rc;
  if ((rc = ml_train_model_construct(&model)))
    return fail("construct", rc);
  if ((rc = ml_train_layer_create(&input, ML_TRAIN_LAYER_TYPE_INPUT)) ||
      (rc = ml_train_layer_set_property(input, "input_shape=1:1:8", NULL)) ||
      (rc = ml_train_model_add_layer(model, input)))
    return fail("input layer", rc);
  if ((rc = ml_train_layer_create(&fc, ML_TRAIN_LAYER_TYPE_FC)) ||
      (rc = ml_train_layer_set_property(fc, "unit=2 | activation=softmax", NULL)) ||
      (rc = ml_train_model_add_layer(model, fc)))
    return fail("fc layer", rc);
  if ((rc = ml_train_model_compile(model, "loss=cross", "batch_size=4", NULL)))
    return fail("compile", rc);
  if ((rc = ml_train_model_destroy(model)))
    return fail("destroy", rc);
  puts("tiny app: construct, compile, destroy ok");
  return 0;
}
